import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { isEnvKey } from '../config.js'

const VERSION = 'v1'

/**
 * AES-256-GCM for values kept at rest (env vars). Each value gets a fresh 96-bit IV; the associated data binds a
 * ciphertext to its place (app and name), so a value copied onto another row does not decrypt.
 * Format: `v1.<iv>.<tag>.<ciphertext>`, base64url parts.
 */
export class SecretBox {
  readonly #key: Buffer

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key')
    this.#key = key
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv)
    cipher.setAAD(Buffer.from(aad, 'utf8'))
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.')
  }

  /** Throws when the value was not sealed with this key and this associated data. */
  open(sealed: string, aad: string): string {
    const [version, iv, tag, ct] = sealed.split('.')
    if (version !== VERSION || iv === undefined || tag === undefined || ct === undefined) throw new Error('not a sealed value')
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'))
    decipher.setAAD(Buffer.from(aad, 'utf8'))
    decipher.setAuthTag(Buffer.from(tag, 'base64url'))
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
  }
}

/**
 * The env-var key: SERVICE_ENV_KEY when set; else the key file (default `env.key` beside the database), created with
 * mode 600 on first start so `npm start` works with nothing configured. A throwaway database gets a throwaway key.
 */
export function loadEnvKey(config: { envKey: string; envKeyFile: string; database: string }): Buffer {
  if (config.envKey) return decodeKey(config.envKey)
  if (config.database === ':memory:' && !config.envKeyFile) return randomBytes(32)
  const file = config.envKeyFile || join(dirname(config.database), 'env.key')
  if (existsSync(file)) {
    const text = readFileSync(file, 'utf8').trim()
    if (!isEnvKey(text)) throw new Error(`${file} does not hold a 32-byte base64 key`)
    return decodeKey(text)
  }
  mkdirSync(dirname(file), { recursive: true })
  const key = randomBytes(32)
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  chmodSync(file, 0o600)
  return key
}

function decodeKey(value: string): Buffer {
  return Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
}
