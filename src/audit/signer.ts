import type { Repos } from '../db/repos/index.js'
import type { Checkpoint } from './chain.js'
import { signCheckpoint } from './checkpoint.js'

/**
 * Signs the heads of the audit chains that grew since their last checkpoint, with the current signing key
 * (docs/decisions/audit-chain.md, "Checkpoints"). Several processes may sign the same head: the second checkpoint of one
 * place is dropped by its primary key. Returns the checkpoints written.
 */
export async function signHeads(repos: Repos, now: number, only?: string): Promise<Checkpoint[]> {
  const key = await repos.signingKeys.current()
  if (!key) return [] // a database the server has not started on yet: nothing signs, nothing to sign either
  const signed: Checkpoint[] = []
  for (const head of await repos.audit.unsignedHeads(only)) {
    const checkpoint = await signCheckpoint({ organizationId: head.organizationId, seq: head.seq, hash: head.hash, at: now }, key)
    await repos.audit.addCheckpoint({ ...checkpoint, kind: 'head' })
    signed.push(checkpoint)
  }
  return signed
}
