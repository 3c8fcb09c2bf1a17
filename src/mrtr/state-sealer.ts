import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { Repos } from '../db/repos/index.js'
import type { RequestStateKey } from '../db/repos/request-state-keys.js'

/**
 * Seals and opens the `requestState` of 2026-07-28 input_required results. A requestState comes back from the client
 * and is attacker-controlled: it is sealed with AES-256-GCM, so a client can neither read nor change it, and any
 * alteration fails the authentication tag. Format: `v1.<kid>.<iv>.<ciphertext+tag>` (base64url parts). The key id is
 * also authenticated (additional data), so a state cannot be moved under another key.
 *
 * Keys live in the database (`request_state_keys`), like the access-token signing keys: every process of a service
 * seals and opens with the same keys, and `service-mcp state-keys rotate` replaces the sealing key while the older
 * ones keep opening what they sealed. A key id this process has not seen is looked up again before a state is refused.
 */

const VERSION = 'v1'
const IV_BYTES = 12
const TAG_BYTES = 16
const FORMAT = /^v1\.([A-Za-z0-9_-]{1,64})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22,})$/

export function generateStateKey(now = Date.now()): Omit<RequestStateKey, 'retiredAt'> {
  return { kid: randomBytes(9).toString('base64url'), secret: randomBytes(32).toString('base64url'), createdAt: now }
}

function additionalData(kid: string): Buffer {
  return Buffer.from(`service-mcp requestState ${VERSION} ${kid}`)
}

export class RequestStateSealer {
  readonly #repos: Repos
  readonly #keys = new Map<string, Buffer>()

  constructor(repos: Repos) {
    this.#repos = repos
  }

  /** Creates the first key on an empty database. */
  ensureKey(): void {
    if (!this.#repos.requestStateKeys.current()) this.#repos.requestStateKeys.rotate(generateStateKey())
  }

  seal(payload: Record<string, unknown>): string {
    const key = this.#repos.requestStateKeys.current()
    if (!key) throw new Error('no requestState key: the database has none that is not retired')
    const secret = this.#secret(key.kid, key.secret)
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', secret, iv)
    cipher.setAAD(additionalData(key.kid))
    const sealed = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${VERSION}.${key.kid}.${iv.toString('base64url')}.${sealed.toString('base64url')}`
  }

  /** The payload, or null when the state is malformed, sealed with an unknown key, or altered in any way. */
  open(state: string): Record<string, unknown> | null {
    const m = FORMAT.exec(state)
    if (!m) return null
    const [, kid, ivText, sealedText] = m as unknown as [string, string, string, string]
    const secret = this.#secretFor(kid)
    if (!secret) return null
    const iv = Buffer.from(ivText, 'base64url')
    const sealed = Buffer.from(sealedText, 'base64url')
    if (iv.length !== IV_BYTES || sealed.length <= TAG_BYTES) return null
    try {
      const decipher = createDecipheriv('aes-256-gcm', secret, iv)
      decipher.setAAD(additionalData(kid))
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
      const plain = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()])
      const payload: unknown = JSON.parse(plain.toString('utf8'))
      return typeof payload === 'object' && payload !== null && !Array.isArray(payload) ? (payload as Record<string, unknown>) : null
    } catch {
      return null
    }
  }

  #secretFor(kid: string): Buffer | undefined {
    const known = this.#keys.get(kid)
    if (known) return known
    const stored = this.#repos.requestStateKeys.byKid(kid)
    return stored ? this.#secret(stored.kid, stored.secret) : undefined
  }

  #secret(kid: string, encoded: string): Buffer {
    let secret = this.#keys.get(kid)
    if (!secret) {
      secret = Buffer.from(encoded, 'base64url')
      if (secret.length !== 32) throw new Error(`requestState key ${kid} is not 32 bytes`)
      this.#keys.set(kid, secret)
    }
    return secret
  }
}
