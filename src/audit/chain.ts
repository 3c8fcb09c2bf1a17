import { createHash } from 'node:crypto'
import type { AuditEntry } from '../db/types.js'
import { canonicalJson } from '../lib/canonical-json.js'

/**
 * The audit chain of one organization (docs/decisions/audit-chain.md): how an entry is hashed, and the walk that finds
 * the first entry deleted, inserted or edited. Pure: the command line runs it on the database's rows and on an
 * export's lines alike.
 */

/** `prev_hash` of the first entry of a chain that was never purged. */
export const GENESIS = '0'.repeat(64)

const DOMAIN = 'service-mcp-audit-v1\n'

/**
 * An entry as the chain sees it: every stored field, with its place in the chain (null: written outside it). The
 * stored row's type, with any outcome: an export may hold one this version does not know.
 */
export type ChainEntry = Omit<AuditEntry, 'outcome'> & { outcome: string }

/** A signed head: the entry at `seq` had `hash`, as the server's key with `kid` said at `at`. */
export interface Checkpoint {
  organizationId: string
  seq: number
  hash: string
  at: number
  kid: string
  /** The compact JWS over {organization_id, seq, hash, at}. */
  jws: string
}

/** Where a purged chain now starts: the first kept entry's seq and prev_hash, signed like a checkpoint. */
export interface Anchor {
  seq: number
  prevHash: string
}

/** The hash an entry must carry: SHA-256 (hex) of the domain prefix and the entry's canonical JSON. */
export function entryHash(e: Omit<ChainEntry, 'hash'>): string {
  const content = {
    id: e.id,
    organization_id: e.organizationId,
    seq: e.seq,
    prev_hash: e.prevHash,
    at: e.at,
    user_id: e.userId,
    membership_id: e.membershipId,
    credential_kind: e.credentialKind,
    credential_id: e.credentialId,
    client_id: e.clientId,
    action: e.action,
    target_type: e.targetType,
    target_id: e.targetId,
    outcome: e.outcome,
    details: e.details,
  }
  return createHash('sha256').update(DOMAIN).update(canonicalJson(content)).digest('hex')
}

export type ProblemKind = 'edited' | 'deleted' | 'inserted' | 'rewritten' | 'bad_signature'

export interface Problem {
  kind: ProblemKind
  /** The place in the chain where it shows. */
  seq: number | null
  /** The entry it names, when there is one (a deleted entry is named by the one that follows it). */
  id: string | null
  message: string
}

export interface ChainReport {
  /** Entries walked. */
  entries: number
  /** The first problem, in chain order; absent when the chain holds. */
  problem?: Problem
  /** The last seq a verified checkpoint covers (every entry up to it is proven); null when none verified. */
  signedThrough: number | null
  /** Entries after signedThrough: chained, not signed yet. */
  unsigned: number
}

/**
 * Walks one organization's entries (any order) against its checkpoints. `checkSignature` says whether a checkpoint's
 * JWS verifies: true, false (a forged or altered signature), or `unknown` (a key the verifier does not hold: the
 * checkpoint proves nothing, and is no problem either).
 */
export async function verifyChain(
  entries: readonly ChainEntry[],
  checkpoints: readonly Checkpoint[],
  checkSignature: (c: Checkpoint) => Promise<boolean | 'unknown'>,
  anchor: Anchor = { seq: 1, prevHash: GENESIS },
): Promise<ChainReport> {
  const walked = walk(entries, anchor)
  const report: ChainReport = { entries: entries.length, signedThrough: null, unsigned: 0 }
  const end = walked.problem?.seq ?? Number.POSITIVE_INFINITY
  let problem = walked.problem
  for (const c of [...checkpoints].sort((a, b) => a.seq - b.seq)) {
    // A checkpoint past the first broken entry cannot be compared with anything trustworthy.
    if (c.seq >= end) break
    const signature = await checkSignature(c)
    if (signature === false) {
      problem = { kind: 'bad_signature', seq: c.seq, id: null, message: `The checkpoint at seq ${c.seq} (key ${c.kid}) does not verify: it was altered or not signed by this server` }
      break
    }
    if (signature === 'unknown') continue
    const hash = walked.hashes.get(c.seq)
    if (hash === undefined) continue // purged, or past the end of what was exported
    if (hash !== c.hash) {
      const from = report.signedThrough === null ? anchor.seq : report.signedThrough + 1
      problem = {
        kind: 'rewritten',
        seq: c.seq,
        id: walked.ids.get(c.seq) ?? null,
        message: `The chain up to seq ${c.seq} is not the one signed at ${new Date(c.at).toISOString()}: an entry between seq ${from} and ${c.seq} was changed and every later hash recomputed`,
      }
      break
    }
    report.signedThrough = c.seq
  }
  if (problem) report.problem = problem
  const last = walked.lastSeq
  report.unsigned = last === null ? 0 : last - (report.signedThrough ?? anchor.seq - 1)
  return report
}

interface Walked {
  problem?: Problem
  hashes: Map<number, string>
  ids: Map<number, string>
  lastSeq: number | null
}

/** The chain's links in seq order: the first entry that is not where its predecessor says it should be. */
function walk(entries: readonly ChainEntry[], anchor: Anchor): Walked {
  const hashes = new Map<number, string>()
  const ids = new Map<number, string>()
  const outside = entries.filter((e) => e.seq === null || e.prevHash === null || e.hash === null)
  const chained = entries.filter((e) => e.seq !== null && e.prevHash !== null && e.hash !== null).sort((a, b) => a.seq! - b.seq! || a.id.localeCompare(b.id))
  let expected = anchor.seq
  let prev = anchor.prevHash
  let lastSeq: number | null = null
  const stop = (problem: Problem): Walked => ({ problem, hashes, ids, lastSeq })
  for (let i = 0; i < chained.length; i++) {
    const e = chained[i]!
    const seq = e.seq!
    if (chained[i + 1]?.seq === seq) {
      // Two entries at one place: the one that does not link to its predecessor was inserted (or, when both do, the
      // later id: the chain's own entry was written first).
      const twins = chained.filter((x) => x.seq === seq)
      const intruder = twins.find((x) => x.prevHash !== prev || entryHash(x) !== x.hash) ?? twins[twins.length - 1]!
      return stop({ kind: 'inserted', seq, id: intruder.id, message: `Entry ${intruder.id} claims seq ${seq}, which another entry holds: it was inserted` })
    }
    if (seq > expected) {
      return stop({ kind: 'deleted', seq: expected, id: e.id, message: `Entry seq ${expected} is missing (the chain jumps from ${expected - 1} to ${seq} before entry ${e.id}): it was deleted` })
    }
    if (seq < expected) {
      return stop({ kind: 'inserted', seq, id: e.id, message: `Entry ${e.id} claims seq ${seq}, before where the chain starts: it was inserted` })
    }
    if (entryHash(e) !== e.hash) {
      return stop({ kind: 'edited', seq, id: e.id, message: `Entry ${e.id} (seq ${seq}) does not match its hash: it was edited` })
    }
    if (e.prevHash !== prev) {
      return stop({ kind: 'deleted', seq, id: e.id, message: `Entry ${e.id} (seq ${seq}) does not follow the entry before it: an entry before it was deleted or replaced` })
    }
    hashes.set(seq, e.hash!)
    ids.set(seq, e.id)
    prev = e.hash!
    lastSeq = seq
    expected = seq + 1
  }
  // Entries with no place in the chain were written around it (by hand, or by a server that does not chain).
  const stray = [...outside].sort((a, b) => a.id.localeCompare(b.id))[0]
  if (stray) return stop({ kind: 'inserted', seq: null, id: stray.id, message: `Entry ${stray.id} has no place in the chain: it was inserted outside the server` })
  return { hashes, ids, lastSeq }
}
