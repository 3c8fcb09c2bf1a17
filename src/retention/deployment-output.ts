import type { Repos } from '../db/repos/index.js'
import type { Batches } from './batches.js'

const DAY_MS = 86_400_000

export interface OutputRetention {
  /** SERVICE_DEPLOYMENT_OUTPUT_KEEP_RUNS: per app, the newest ended runs that keep their output (0: no count limit). */
  keepRuns: number
  /** SERVICE_DEPLOYMENT_OUTPUT_KEEP_DAYS: output of runs that ended longer ago goes (0: no age limit). */
  keepDays: number
}

/**
 * Deletes the stored output of ended runs past either limit: each run is first marked (output_purged_at, output_bytes
 * 0; a run still queued or running is never marked), so the tools say at once that its output was deleted and the
 * quotas stop counting it, then its lines go, `batches.size` per statement. Runs marked by a purge that stopped
 * halfway lose their remaining lines first. Returns how many runs and lines went.
 */
export async function purgeDeploymentOutput(repos: Repos, rules: OutputRetention, now: number, batches: Batches): Promise<{ runs: number; lines: number }> {
  let runs = 0
  let lines = 0
  const deleteLinesOf = async (ids: string[]) => {
    for (const id of ids) {
      for (;;) {
        const gone = await repos.deployments.deleteLines(id, batches.size)
        lines += gone
        await batches.pause()
        if (gone < batches.size) break
      }
    }
  }
  await deleteLinesOf(await repos.deployments.purgedWithLines(batches.size))
  if (rules.keepRuns === 0 && rules.keepDays === 0) return { runs, lines }
  const endedBefore = rules.keepDays > 0 ? now - rules.keepDays * DAY_MS : null
  for (;;) {
    const due = await repos.deployments.outputToPurge({ keepRuns: rules.keepRuns, endedBefore, limit: batches.size })
    if (due.length === 0) break
    const marked = await repos.deployments.markOutputPurged(due, now)
    runs += marked.length
    await batches.pause()
    await deleteLinesOf(marked)
    // Every run found is marked now, unless it started again meanwhile (never: an ended run stays ended).
    if (marked.length === 0) break
  }
  return { runs, lines }
}
