import type { Anchor, ChainEntry, Checkpoint } from './chain.js'

/**
 * The audit export (`service-mcp audit export --format jsonl`): one JSON object per line, so a receiver can read it with
 * anything. First a header (the organization, where the exported part of the chain starts, the public keys of the
 * checkpoints), then the entries in chain order, then the checkpoints that cover them. docs/decisions/audit-chain.md.
 */

export const EXPORT_FORMAT = 'service-mcp-audit-export-v1' as const

export interface ExportHeader {
  type: 'header'
  format: typeof EXPORT_FORMAT
  organization: { id: string; slug: string }
  /** The --since it was made with (ISO 8601), or null for the whole kept chain. */
  since: string | null
  exported_at: string
  /** seq and prev_hash of the first exported entry: where this part of the chain starts. */
  start: { seq: number; prev_hash: string }
  /** The public keys (JWK) of the exported checkpoints, as a convenience: a verifier trusts the published ones. */
  keys: Array<Record<string, unknown>>
}

/** Snake case on the wire: the same names the hash covers (chain.ts). */
function entryLine(e: ChainEntry): Record<string, unknown> {
  return {
    type: 'entry', id: e.id, organization_id: e.organizationId, seq: e.seq, prev_hash: e.prevHash, hash: e.hash, at: e.at,
    at_iso: new Date(e.at).toISOString(), user_id: e.userId, membership_id: e.membershipId, credential_kind: e.credentialKind,
    credential_id: e.credentialId, client_id: e.clientId, action: e.action, target_type: e.targetType, target_id: e.targetId,
    outcome: e.outcome, details: e.details,
  }
}

function checkpointLine(c: Checkpoint): Record<string, unknown> {
  return { type: 'checkpoint', organization_id: c.organizationId, seq: c.seq, hash: c.hash, at: c.at, kid: c.kid, jws: c.jws }
}

export function exportLines(header: ExportHeader, entries: readonly ChainEntry[], checkpoints: readonly Checkpoint[]): string[] {
  return [JSON.stringify(header), ...entries.map((e) => JSON.stringify(entryLine(e))), ...checkpoints.map((c) => JSON.stringify(checkpointLine(c)))]
}

/** An export that cannot be read: names the line. */
export class ExportFormatError extends Error {}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null)
const int = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) ? v : null)

export function readExport(text: string): { header: ExportHeader; anchor: Anchor; entries: ChainEntry[]; checkpoints: Checkpoint[] } {
  const lines = text.split('\n').filter((l) => l.trim() !== '')
  const parsed = lines.map((line, i) => {
    try {
      const v = JSON.parse(line) as unknown
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object')
      return v as Record<string, unknown>
    } catch (err) {
      throw new ExportFormatError(`line ${i + 1} is not a JSON object (${(err as Error).message})`)
    }
  })
  const header = parsed[0]
  if (!header || header.type !== 'header' || header.format !== EXPORT_FORMAT) throw new ExportFormatError(`line 1 is not the header of a ${EXPORT_FORMAT} file`)
  const start = header.start as { seq?: unknown; prev_hash?: unknown } | undefined
  if (int(start?.seq) === null || str(start?.prev_hash) === null) throw new ExportFormatError('line 1: the header has no start {seq, prev_hash}')
  const entries: ChainEntry[] = []
  const checkpoints: Checkpoint[] = []
  parsed.slice(1).forEach((l, i) => {
    if (l.type === 'entry') {
      entries.push({
        id: str(l.id) ?? '', organizationId: str(l.organization_id) ?? '', seq: int(l.seq), prevHash: str(l.prev_hash), hash: str(l.hash),
        at: int(l.at) ?? 0, userId: str(l.user_id), membershipId: str(l.membership_id), credentialKind: str(l.credential_kind) ?? '',
        credentialId: str(l.credential_id), clientId: str(l.client_id), action: str(l.action) ?? '', targetType: str(l.target_type),
        targetId: str(l.target_id), outcome: str(l.outcome) ?? '', details: (l.details ?? null) as Record<string, unknown> | null,
      })
    } else if (l.type === 'checkpoint') {
      const seq = int(l.seq)
      const at = int(l.at)
      if (seq === null || at === null || !str(l.hash) || !str(l.kid) || !str(l.jws)) throw new ExportFormatError(`line ${i + 2}: a checkpoint needs seq, hash, at, kid and jws`)
      checkpoints.push({ organizationId: str(l.organization_id) ?? '', seq, hash: str(l.hash)!, at, kid: str(l.kid)!, jws: str(l.jws)! })
    } else {
      throw new ExportFormatError(`line ${i + 2}: unknown type ${JSON.stringify(l.type)}`)
    }
  })
  return { header: header as unknown as ExportHeader, anchor: { seq: int(start!.seq)!, prevHash: str(start!.prev_hash)! }, entries, checkpoints }
}
