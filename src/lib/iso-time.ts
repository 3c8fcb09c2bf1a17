const DAY_MS = 86_400_000
// Years 0000–9999 only; anything else (and non-integers) takes Date's own path.
const MAX_MS = 253_402_300_800_000
const dayPrefixes = new Map<number, string>()
const DAY_PREFIX_LIMIT = 4096

function pad2(n: number): string {
  return n < 10 ? '0' + n : String(n)
}

function pad3(n: number): string {
  return n < 10 ? '00' + n : n < 100 ? '0' + n : String(n)
}

/**
 * `new Date(ms).toISOString()`, byte for byte, at a fraction of the cost: list tools format two timestamps per row
 * and Date#toISOString was a fifth of a 20-row tools/call. The date part is computed once per day and remembered.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= MAX_MS) return new Date(ms).toISOString()
  const day = Math.floor(ms / DAY_MS)
  let prefix = dayPrefixes.get(day)
  if (prefix === undefined) {
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11)
    if (dayPrefixes.size >= DAY_PREFIX_LIMIT) dayPrefixes.clear()
    dayPrefixes.set(day, prefix)
  }
  let rest = ms - day * DAY_MS
  const h = Math.floor(rest / 3_600_000)
  rest -= h * 3_600_000
  const m = Math.floor(rest / 60_000)
  rest -= m * 60_000
  const s = Math.floor(rest / 1000)
  return prefix + pad2(h) + ':' + pad2(m) + ':' + pad2(s) + '.' + pad3(rest - s * 1000) + 'Z'
}
