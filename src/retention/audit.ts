import { signCheckpoint } from '../audit/checkpoint.js'
import type { Repos } from '../db/repos/index.js'
import type { Batches } from './batches.js'

const DAY_MS = 86_400_000

export interface AuditPurge {
  organizationId: string
  /** Where the kept chain starts: the seq of the signed start checkpoint. */
  startSeq: number
  deleted: number
}

/**
 * Deletes each organization's audit entries written more than `days` days before `now` (docs/decisions/audit-chain.md,
 * "Retention"). Before any entry of an organization goes, a `start` checkpoint is signed with the current signing key
 * and committed: the first kept seq and its prev_hash (or, when every entry goes, the place after the head and the
 * head's hash), so `audit verify` starts from a signed anchor and still tells this purge from a deletion. Only entries
 * before that seq are deleted, `batches.size` per statement. Nothing is purged while no signing key exists.
 */
export async function purgeAudit(repos: Repos, days: number, now: number, batches: Batches): Promise<AuditPurge[]> {
  if (days === 0) return []
  const key = await repos.signingKeys.current()
  if (!key) return []
  const before = now - days * DAY_MS
  const purged: AuditPurge[] = []
  for (const organizationId of await repos.audit.organizationsWithEntriesBefore(before)) {
    const start = await repos.audit.retentionStart(organizationId, before)
    if (start.oldest === null || start.oldest >= start.seq) continue
    const anchor = await signCheckpoint({ organizationId, seq: start.seq, hash: start.hash, at: now }, key)
    await repos.audit.addCheckpoint({ ...anchor, kind: 'start' })
    let deleted = 0
    for (;;) {
      const gone = await repos.audit.deleteBefore(organizationId, start.seq, batches.size)
      deleted += gone
      await batches.pause()
      if (gone < batches.size) break
    }
    purged.push({ organizationId, startSeq: start.seq, deleted })
  }
  return purged
}
