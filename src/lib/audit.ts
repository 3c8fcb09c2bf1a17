import type { AuditOutcome } from '../db/repos/audit.js'
import type { Repos } from '../db/repos/index.js'
import type { CallContext } from '../rpc/dispatcher.js'

/** One audit-log entry of a call; the member, credential and organization come from the call's principal. */
export interface AuditRecord {
  /** Defaults to the tool name. */
  action?: string
  targetType?: string
  targetId?: string
  outcome: AuditOutcome
  details?: Record<string, unknown>
}

/**
 * Writes an audit-log entry for the call's member and organization, with the call's JSON-RPC id in its details.
 * Never rejects: a failed write is logged, and the call goes on.
 */
export async function writeAudit(repos: Repos, ctx: CallContext, toolName: string, entry: AuditRecord): Promise<void> {
  const p = ctx.principal
  try {
    await repos.audit.add({
      organizationId: p.organizationId,
      userId: p.userId,
      membershipId: p.membershipId,
      credentialKind: p.kind,
      credentialId: p.credentialId,
      clientId: p.clientId ?? null,
      action: entry.action ?? toolName,
      targetType: entry.targetType ?? null,
      targetId: entry.targetId ?? null,
      outcome: entry.outcome,
      details: { request_id: ctx.requestId, ...entry.details },
    })
  } catch (err) {
    ctx.log.error({ err, tool: toolName }, 'could not write the audit log')
  }
}
