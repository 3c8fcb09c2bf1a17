/**
 * The options of `npm run bench -- --compare`, parsed and checked before anything starts (a bad value is an error
 * naming the flag). Every flag also reads BENCH_<NAME> from the environment, as the other benchmark mode does.
 */
import { parseArgs } from 'node:util'
import { numberOption } from '../child.js'

export const COMPARE_SCENARIOS = ['call', 'apps', 'init', 'memory'] as const
export type CompareScenario = (typeof COMPARE_SCENARIOS)[number]

export interface CompareOptions {
  durationMs: number
  warmupMs: number
  /** Concurrencies of the call, apps and init scenarios (closed-loop workers, one connection each). */
  concurrency: number[]
  rounds: number
  /** Idle sessions of the memory scenario, per server. */
  sessions: number
  scenarios: Set<CompareScenario>
  /** `auto`: servers on one core and the load generator on another when the machine allows it; `off`: unpinned. */
  pin: 'auto' | 'off'
  json: string
  help: boolean
}

/** Parses the arguments of the compare mode (`--compare` itself included); throws on an unknown flag or a bad value. */
export function parseCompareOptions(args: readonly string[], env: NodeJS.ProcessEnv = process.env): CompareOptions {
  const { values: flags } = parseArgs({
    args: [...args],
    options: {
      compare: { type: 'boolean' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      concurrency: { type: 'string' },
      rounds: { type: 'string' },
      sessions: { type: 'string' },
      scenarios: { type: 'string' },
      pin: { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
    allowPositionals: false,
  })
  // The flag, else BENCH_<NAME> from `env` (when not empty), else the fallback: child.ts's optionReader, with the
  // environment passed in (the harness's test checks the parsing without touching its own).
  const option = (name: Exclude<keyof typeof flags, 'compare' | 'help'>, fallback: string): string => {
    const fromEnv = env[`BENCH_${name.toUpperCase()}`]
    const v = flags[name]
    return typeof v === 'string' ? v : fromEnv !== undefined && fromEnv !== '' ? fromEnv : fallback
  }
  const durationS = numberOption('duration', option('duration', '5'), 'positive')
  const warmupS = numberOption('warmup', option('warmup', '1'), 'non-negative')
  const concurrency = option('concurrency', '16').split(',').map((c) => numberOption('concurrency', c.trim(), 'positive', true))
  if (new Set(concurrency).size !== concurrency.length) throw new Error(`--concurrency lists a value twice: ${concurrency.join(',')}`)
  const rounds = numberOption('rounds', option('rounds', '3'), 'positive', true)
  const sessions = numberOption('sessions', option('sessions', '2000'), 'positive', true)
  const scenarioNames = option('scenarios', COMPARE_SCENARIOS.join(',')).split(',').map((s) => s.trim())
  for (const s of scenarioNames) {
    if (!(COMPARE_SCENARIOS as readonly string[]).includes(s)) throw new Error(`--scenarios: unknown scenario ${s} (${COMPARE_SCENARIOS.join(', ')})`)
  }
  const pin = option('pin', 'auto')
  if (pin !== 'auto' && pin !== 'off') throw new Error(`--pin must be auto or off, got ${pin}`)
  return {
    durationMs: durationS * 1000,
    warmupMs: warmupS * 1000,
    concurrency,
    rounds,
    sessions,
    scenarios: new Set(scenarioNames as CompareScenario[]),
    pin,
    json: option('json', ''),
    help: flags.help === true,
  }
}
