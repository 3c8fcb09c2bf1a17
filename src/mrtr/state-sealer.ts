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
 *
 * Opening a state whose key this process already holds is synchronous (the path of every retry); only a key id not
 * seen yet is read from the database, and `open` then answers with a promise. Sealing reads the current key each time
 * (another process may have rotated it), so it is asynchronous.
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

  /** Creates the first key on an empty database (before the server is ready). */
  async ensureKey(): Promise<void> {
    if (!(await this.#repos.requestStateKeys.current())) await this.#repos.requestStateKeys.rotate(generateStateKey())
  }

  async seal(payload: Record<string, unknown>): Promise<string> {
    const key = await this.#repos.requestStateKeys.current()
    if (!key) throw new Error('no requestState key: the database has none that is not retired')
    const secret = this.#secret(key.kid, key.secret)
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', secret, iv)
    cipher.setAAD(additionalData(key.kid))
    const sealed = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${VERSION}.${key.kid}.${iv.toString('base64url')}.${sealed.toString('base64url')}`
  }

  /**
   * The payload, or null when the state is malformed, sealed with an unknown key, or altered in any way. A promise
   * only when the state names a key id this process has not seen (it is looked up first).
   */
  open(state: string): Record<string, unknown> | null | Promise<Record<string, unknown> | null> {
    const m = FORMAT.exec(state)
    if (!m) return null
    const [, kid, ivText, sealedText] = m as unknown as [string, string, string, string]
    const known = this.#keys.get(kid)
    if (known) return this.#open(known, kid, ivText, sealedText)
    return this.#lookUp(kid).then((secret) => (secret ? this.#open(secret, kid, ivText, sealedText) : null))
  }

  #open(secret: Buffer, kid: string, ivText: string, sealedText: string): Record<string, unknown> | null {
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

  /** A key id this process has not seen: looked up in the database (a key rotated by another process). */
  async #lookUp(kid: string): Promise<Buffer | undefined> {
    const stored = await this.#repos.requestStateKeys.byKid(kid)
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
