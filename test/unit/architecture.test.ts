import { readdirSync } from 'node:fs'
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

t.test('upward imports only where docs/decisions/architecture.md lists them', async (t) => {
  t.same(upwardImports(edges), ALLOWED_UPWARD)
})

/** Each one is explained in docs/decisions/architecture.md. */
const ALLOWED_UPWARD: string[] = [
  'coordination/shared-streams.ts -> rpc/dispatcher.ts',
  'db/postgres/bus.ts -> coordination/bus.ts',
  'lib/http-edge.ts -> limits/held-open.ts',
]
