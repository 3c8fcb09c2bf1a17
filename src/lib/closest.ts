/**
 * "Did you mean": the known word closest to one that is not known, for messages about a misspelt setting, option or
 * command.
 */

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`: `prot` is one from `port`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i])
  for (let j = 1; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[a.length]![b.length]!
}

/**
 * The candidate `word` most likely means, or undefined when none is close: one it begins (`--redis` for
 * `--redis-url`), or one within an edit per three letters (at least one).
 */
export function closeMatch(word: string, candidates: readonly string[]): string | undefined {
  const limit = Math.max(1, Math.floor(word.replace(/^-+/, '').length / 3))
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const distance = candidate.startsWith(word) ? 0.5 : editDistance(word, candidate)
    if (distance <= limit && distance < bestDistance) [best, bestDistance] = [candidate, distance]
  }
  return best
}
