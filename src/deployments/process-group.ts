import { existsSync, readdirSync, readFileSync } from 'node:fs'

/**
 * What a server that starts after a crash can learn about the process group a run left behind, and how it stops it.
 * A recorded process-group id is only a number: by the time the server restarts, the run may be gone and the number
 * reused by an unrelated group. So a group is signalled only while it holds a process that is provably the run's:
 * one whose environment (/proc/<pid>/environ, as the run was started) carries `SERVICE_DEPLOYMENT_ID=<the run's id>`,
 * an id no other process on the machine has. Where /proc cannot be read (not Linux, another user's processes), nothing
 * is provable and nothing is signalled; the run's supervisor stops it anyway when the server's pipe closes.
 */

/** True where processes can be inspected (Linux /proc). */
export function canInspectProcesses(): boolean {
  return existsSync('/proc/self/stat')
}

/** The process group of `pid` and whether it is a zombie (ended, not yet reaped: it can no longer act); null when gone. */
function statOf(pid: number): { pgrp: number; zombie: boolean } | null {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return { pgrp: Number(fields[2]), zombie: fields[0] === 'Z' }
}

function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0')
  } catch {
    return []
  }
}

/** Live (not zombie) processes of group `pgid`. */
export function groupMembers(pgid: number): number[] {
  if (!canInspectProcesses()) return []
  const members: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const stat = statOf(Number(entry))
    if (stat && stat.pgrp === pgid && !stat.zombie) members.push(Number(entry))
  }
  return members
}

/** Live processes of group `pgid` that belong to deployment `deploymentId` (see the module comment). */
export function runProcesses(pgid: number, deploymentId: string): number[] {
  const marker = `SERVICE_DEPLOYMENT_ID=${deploymentId}`
  return groupMembers(pgid).filter((pid) => environOf(pid).includes(marker))
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal)
  } catch {
    // Gone in the meantime.
  }
}

/** Blocks the thread for `ms`: only for the start-up recovery, which runs before the server listens. */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

function waitSync(done: () => boolean, ms: number): boolean {
  const deadline = Date.now() + ms
  while (!done()) {
    if (Date.now() >= deadline) return false
    sleepSync(20)
  }
  return true
}

export type LeftoverOutcome = 'none' | 'stopped' | 'killed' | 'survived'

/**
 * Stops what is left of a run in group `pgid`: SIGTERM, then SIGKILL after `graceMs`, each sent only while the group
 * still holds a process of the run (checked right before). Returns what happened: `none` when nothing of the run was
 * alive (or nothing could be proved), `stopped` when SIGTERM ended it, `killed` when SIGKILL did, `survived` when
 * something of it was still there a second after SIGKILL (it cannot act for long: SIGKILL cannot be caught).
 * Synchronous and bounded by `graceMs` + 1 s.
 */
export function stopLeftoverRun(pgid: number, deploymentId: string, graceMs: number): LeftoverOutcome {
  const alive = () => runProcesses(pgid, deploymentId).length > 0
  if (!alive()) return 'none'
  signalGroup(pgid, 'SIGTERM')
  if (waitSync(() => !alive(), graceMs)) return 'stopped'
  if (!alive()) return 'stopped'
  signalGroup(pgid, 'SIGKILL')
  return waitSync(() => !alive(), 1000) ? 'killed' : 'survived'
}
