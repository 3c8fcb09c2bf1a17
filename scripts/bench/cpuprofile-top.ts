/**
 * Summarizes a V8 .cpuprofile (node --cpu-prof): the functions with the most self time, the functions with the most
 * inclusive time, and self time grouped by package / source area.
 *
 *   npx tsx scripts/bench/cpuprofile-top.ts <file.cpuprofile> [--top 30] [--skip-ms 2500] [--until-ms 0]
 *
 * --skip-ms drops the first milliseconds of samples (server start, module loading); --until-ms stops at that offset.
 */
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}

interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '30' }, 'skip-ms': { type: 'string', default: '0' }, 'until-ms': { type: 'string', default: '0' } },
})
const file = positionals[0]
if (!file) {
  process.stderr.write('usage: cpuprofile-top.ts <file.cpuprofile> [--top 30] [--skip-ms 2500] [--until-ms 0]\n')
  process.exit(1)
}
const top = Number(values.top)
const skipUs = Number(values['skip-ms']) * 1000
const untilUs = Number(values['until-ms']) * 1000

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map<number, ProfileNode>()
const parent = new Map<number, number>()
for (const n of profile.nodes) byId.set(n.id, n)
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

const ROOT = process.cwd()

function where(frame: CallFrame): string {
  let url = frame.url
  if (url.startsWith('file://')) {
    try {
      url = relative(ROOT, fileURLToPath(url))
    } catch {
      /* keep the URL */
    }
  }
  return url ? `${url}:${frame.lineNumber + 1}` : ''
}

function label(frame: CallFrame): string {
  const name = frame.functionName || '(anonymous)'
  const at = where(frame)
  return at ? `${name}  ${at}` : name
}

function area(frame: CallFrame): string {
  const url = frame.url
  if (!url) return frame.functionName.startsWith('(') ? frame.functionName : '(native / V8 builtins)'
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`
  const nm = url.lastIndexOf('/node_modules/')
  if (nm !== -1) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  const rel = where(frame).replace(/:\d+$/, '')
  if (rel.startsWith('src/')) return rel.split('/').slice(0, 3).join('/')
  return rel
}

// Sample i is taken at startTime + sum(timeDeltas[0..i]); its weight is the gap to the next sample.
const self = new Map<string, number>()
const inclusive = new Map<string, number>()
const areas = new Map<string, number>()
let total = 0
let t = profile.startTime
const first = profile.startTime
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] ?? 0
  const offset = t - first
  if (offset < skipUs) continue
  if (untilUs > 0 && offset > untilUs) break
  const weight = profile.timeDeltas[i + 1] ?? 0
  if (weight <= 0) continue
  const node = byId.get(profile.samples[i]!)
  if (!node) continue
  total += weight
  const key = label(node.callFrame)
  self.set(key, (self.get(key) ?? 0) + weight)
  const a = area(node.callFrame)
  areas.set(a, (areas.get(a) ?? 0) + weight)
  const seen = new Set<string>()
  for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
    const k = label(byId.get(id)!.callFrame)
    if (seen.has(k)) continue
    seen.add(k)
    inclusive.set(k, (inclusive.get(k) ?? 0) + weight)
  }
}

const idle = self.get('(idle)') ?? 0
const busy = total - idle
const pct = (v: number, of: number) => `${((100 * v) / of).toFixed(1).padStart(5)}%`
const ms = (v: number) => `${(v / 1000).toFixed(0).padStart(7)} ms`

function print(title: string, entries: Map<string, number>, n: number, skip: (k: string) => boolean = () => false): void {
  process.stdout.write(`\n${title}\n`)
  const rows = [...entries].filter(([k]) => !skip(k)).sort((a, b) => b[1] - a[1]).slice(0, n)
  for (const [k, v] of rows) process.stdout.write(`${pct(v, busy)} ${ms(v)}  ${k}\n`)
}

process.stdout.write(
  `${file}\nwindow ${(total / 1e6).toFixed(2)} s, busy (non-idle) ${(busy / 1e6).toFixed(2)} s = ${pct(busy, total).trim()} of one core; ` +
    'percentages below are of busy time\n',
)
print('Self time by package / source area', areas, top, (k) => k === '(idle)')
print(`Top ${top} functions by self time`, self, top, (k) => k === '(idle)')
print(`Top ${top} functions by inclusive time`, inclusive, top, (k) => k === '(root)' || k === '(idle)')
