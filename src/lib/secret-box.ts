import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { ConfigError, databaseTarget, isEnvKey, POSTGRES_NEEDS_ENV_KEY } from '../config.js'
import type { SqliteFile } from './database-url.js'
import { makeFolders } from './folders.js'

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
 * Where the env-var key comes from: SERVICE_ENV_KEY when set; else the key file, SERVICE_ENV_KEY_FILE, by default
 * `env.key` beside a SQLite database file; an in-memory database without a key file gets a throwaway key, held in
 * memory. A PostgreSQL database has no default: its key is given (config.ts, docs/decisions/storage.md).
 * Which key belongs to which database is db/env-key.ts's business.
 */
export type EnvKeyLocation =
  /** `describe` follows "the env key": "SERVICE_ENV_KEY", "file /srv/data/env.key (SERVICE_ENV_KEY_FILE, …)". */
  | { kind: 'setting'; describe: string }
  | { kind: 'file'; file: string; describe: string }
  | { kind: 'throwaway'; describe: string }

export function envKeyLocation(config: { envKey: string; envKeyFile: string; database: string }): EnvKeyLocation {
  if (config.envKey) return { kind: 'setting', describe: 'SERVICE_ENV_KEY' }
  if (config.envKeyFile) return keyFile(resolve(config.envKeyFile), 'SERVICE_ENV_KEY_FILE')
  const database = databaseTarget(config.database)
  if (database.kind === 'postgres') throw new ConfigError(POSTGRES_NEEDS_ENV_KEY)
  if (database.kind === 'memory') return { kind: 'throwaway', describe: 'of this in-memory database (a throwaway one)' }
  return keyFile(besideDatabase(database.file), 'SERVICE_ENV_KEY_FILE, by default env.key beside SERVICE_DATABASE')
}

/** The default key file: `env.key` in the folder of the database file. */
function besideDatabase(file: SqliteFile): string {
  return resolve(dirname(file), 'env.key')
}

function keyFile(file: string, setting: string): EnvKeyLocation {
  return { kind: 'file', file, describe: `file ${file} (${setting})` }
}

/**
 * The key at `location`; null when it is a key file that does not exist (or a throwaway key, which nothing holds yet).
 * A key file that holds no key is a ConfigError.
 */
export function readEnvKey(location: EnvKeyLocation, config: { envKey: string }): Buffer | null {
  if (location.kind === 'setting') return decodeKey(config.envKey)
  if (location.kind === 'throwaway') return null
  let text: string
  try {
    text = readFileSync(location.file, 'utf8').trim()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new ConfigError(`The env key ${location.describe} cannot be read: ${(err as Error).message}`)
  }
  if (!isEnvKey(text)) throw new ConfigError(`The env key ${location.describe} does not hold a 32-byte base64 key`)
  return decodeKey(text)
}

/** A new random key: written to the key file (created with mode 600, never over an existing one), or in memory only. */
export function createEnvKey(location: EnvKeyLocation): Buffer {
  const key = randomBytes(32)
  if (location.kind !== 'file') return key
  try {
    makeFolders(dirname(location.file), 0o700)
    writeFileSync(location.file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
    chmodSync(location.file, 0o600)
  } catch (err) {
    throw new ConfigError(`The env key ${location.describe} cannot be created: ${(err as Error).message}`)
  }
  return key
}

function decodeKey(value: string): Buffer {
  return Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
}
