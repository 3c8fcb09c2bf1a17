import { Parser, type Result } from 'tap-parser'

/** Leaf assertions (subtests' closing lines not counted), as tap's own totals count them. */
export type Counts = { total: number; pass: number; fail: number; skip: number; todo: number }
export const noCounts = (): Counts => ({ total: 0, pass: 0, fail: 0, skip: 0, todo: 0 })

/** What became of one test file. */
export interface Outcome {
  ok: boolean
  counts: Counts
  /** The file's TAP, as it would print in a process of its own. */
  output: string
  ms: number
  problem?: string
}

/** A TAP parser that adds every leaf assertion it reads, at any depth, to `counts`. */
export function countingParser(counts: Counts): Parser {
  const parser = new Parser()
  const count = (p: Parser) => {
    p.on('child', count)
    p.on('assert', (r: Result) => {
      if (r.closingTestPoint) return
      counts.total++
      if (r.todo) counts.todo++
      else if (r.skip) counts.skip++
      else if (r.ok) counts.pass++
      else counts.fail++
    })
  }
  count(parser)
  return parser
}

/** Parses a whole TAP text: its counts, and whether tap-parser found it passing. */
export function countTap(text: string): { counts: Counts; ok: boolean } {
  const counts = noCounts()
  const parser = countingParser(counts)
  parser.end(text)
  return { counts, ok: parser.ok }
}
