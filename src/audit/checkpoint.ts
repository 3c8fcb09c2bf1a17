import { createPrivateKey, type KeyObject } from 'node:crypto'
import { CompactSign, compactVerify, importJWK } from 'jose'
import type { Checkpoint } from './chain.js'

/**
 * Checkpoints of the audit chain (docs/decisions/audit-chain.md): the head `{organization_id, seq, hash, at}` as a
 * compact JWS, ES256, signed with the key that signs access tokens, so the published key set verifies it.
 */

export const CHECKPOINT_TYP = 'service-mcp-audit-checkpoint'
const ALG = 'ES256'

type Head = Omit<Checkpoint, 'kid' | 'jws'>

function payloadOf(head: Head): Record<string, unknown> {
  return { organization_id: head.organizationId, seq: head.seq, hash: head.hash, at: head.at }
}

/** Signs `head` with the private key (PKCS#8 PEM) whose key id is `kid`. */
export async function signCheckpoint(head: Head, key: { kid: string; privateKey: string | KeyObject }): Promise<Checkpoint> {
  const privateKey = typeof key.privateKey === 'string' ? createPrivateKey(key.privateKey) : key.privateKey
  const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(payloadOf(head))))
    .setProtectedHeader({ alg: ALG, kid: key.kid, typ: CHECKPOINT_TYP })
    .sign(privateKey)
  return { ...head, kid: key.kid, jws }
}

/**
 * Whether `c`'s JWS verifies with the public key its `kid` names in `keys` and says exactly what `c` says: true,
 * false (altered or forged), or `unknown` when `keys` has no key with that id.
 */
export async function checkCheckpoint(c: Checkpoint, keys: ReadonlyArray<Record<string, unknown>>): Promise<boolean | 'unknown'> {
  const jwk = keys.find((k) => k.kid === c.kid)
  if (!jwk) return 'unknown'
  try {
    const key = await importJWK({ ...jwk, alg: ALG } as Parameters<typeof importJWK>[0], ALG)
    const { payload, protectedHeader } = await compactVerify(c.jws, key, { algorithms: [ALG] })
    if (protectedHeader.typ !== CHECKPOINT_TYP || protectedHeader.kid !== c.kid) return false
    return new TextDecoder().decode(payload) === JSON.stringify(payloadOf(c))
  } catch {
    return false
  }
}
