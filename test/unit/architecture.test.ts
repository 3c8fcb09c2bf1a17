import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { cycles, importGraph, methodNamesIn, upwardImports } from '../../scripts/import-graph.js'
import { ROOT } from '../helpers/root.js'

/**
 * The shape of src/ that docs/decisions/architecture.md promises, checked on the source (scripts/import-graph.ts).
 */
const SRC = join(ROOT, 'src')
const { edges, allEdges } = importGraph(SRC)

t.test('no run-time import cycle', async (t) => {
  t.same(cycles(edges), [])
})

t.test('rpc/ imports nothing from sessions/, not even a type: the dispatcher owns calls, the store owns sessions', async (t) => {
  const wrong = [...allEdges].flatMap(([from, tos]) => (from.startsWith('rpc/') ? [...tos].filter((to) => to.startsWith('sessions/')).map((to) => `${from} -> ${to}`) : []))
  t.same(wrong, [])
})

t.test('the transport knows eras, not methods: no file of plugins/mcp-transport/ names an MCP method', async (t) => {
  const dir = join(SRC, 'plugins', 'mcp-transport')
  const named = readdirSync(dir).filter((f) => f.endsWith('.ts')).flatMap((f) => methodNamesIn(join(dir, f)).map((m) => `${f}: ${m}`))
  t.same(named, [])
})

t.test('the observer is told in one place: only rpc/intake.ts makes observations; no front-end imports the observer', async (t) => {
  const wrong = [...allEdges].flatMap(([from, tos]) => (tos.has('rpc/observer.ts') && from !== 'rpc/intake.ts' && from.startsWith('plugins/mcp-transport/') ? [`${from} -> rpc/observer.ts`] : []))
  t.same(wrong, [])
})

t.test('a front-end runs no precheck and counts no limit itself: the intake admits (rpc/intake.ts)', async (t) => {
  const dir = join(SRC, 'plugins', 'mcp-transport')
  const found = readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...readFileSync(join(dir, f), 'utf8').matchAll(/\.(precheck|prefersStream|longLived|limits)\?\.\(/g)].map((m) => `${f}: ${m[1]}`))
  t.same(found, [])
})

t.test('upward imports only where docs/decisions/architecture.md lists them', async (t) => {
  t.same(upwardImports(edges), ALLOWED_UPWARD)
})

/** Each one is explained in docs/decisions/architecture.md. */
const ALLOWED_UPWARD: string[] = [
  'coordination/shared-streams.ts -> rpc/dispatcher.ts',
  'db/postgres/bus.ts -> coordination/bus.ts',
  'lib/http-edge.ts -> limits/held-open.ts',
]
