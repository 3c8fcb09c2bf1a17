import { ConfigError, databaseTarget } from '../config.js'
import { describeDatabase } from '../lib/database-url.js'
import { createEnvKey, envKeyLocation, readEnvKey, SecretBox, type EnvKeyLocation } from '../lib/secret-box.js'
import { envVarAad } from './repos/env-vars.js'
import type { Repos, TxRepos } from './repos/index.js'

/**
 * The env-var key belongs to one database: the values it sealed are in that database and nowhere else. A database
 * restored or moved without its env.key used to get a new key silently, and the deployments of apps with env vars
 * then failed with "Unsupported state or unable to authenticate data". So the database records a key check (a constant
 * sealed with its key, `service_meta.env_key_check`), and a start whose key does not open it is refused, with what to
 * do. A database that holds sealed values (or a check) never gets a new key. A database from before the check gets
 * one at its first start, once its sealed values (if any) are proven to open with the key.
 */

const CHECK = 'env_key_check'
const CHECK_PLAINTEXT = 'service-mcp env key check v1'
const CHECK_AAD = 'service_meta\u0000env_key_check'

type KeyRepos = Pick<Repos, 'serviceMeta' | 'envVars' | 'transaction'>

interface Config {
  envKey: string
  envKeyFile: string
  database: string
}

/** What the database holds that only its key opens. */
interface Sealed {
  check: string | undefined
  values: number
}

async function sealedIn(repos: KeyRepos): Promise<Sealed> {
  return { check: await repos.serviceMeta.get(CHECK), values: await repos.envVars.count() }
}

function holdsSealed(sealed: Sealed): boolean {
  return sealed.check !== undefined || sealed.values > 0
}

export function valuesPhrase(n: number): string {
  return n === 1 ? '1 env var value' : `${n} env var values`
}

/**
 * Whose key it is, in the messages: the database starting (its path and the setting), or a backup being restored (its
 * file, and what to do instead of a reset).
 */
export interface KeySubject {
  /** "database /srv/data/service.db (SERVICE_DATABASE)", "the backup /backups/x.db" */
  name: string
  /** "database", "backup" */
  noun: string
  /** The likely cause, one sentence. */
  why: string
  /** What to do when the key is lost. */
  lost(sealed: { values: number }): string
}

function databaseSubject(config: Config): KeySubject {
  return {
    name: describeDatabase(databaseTarget(config.database)),
    noun: 'database',
    why: 'The database was probably restored or moved without its env.key.',
    lost: (sealed) => sealed.values > 0
      ? `if that key is lost, \`service-mcp env-key reset --force\` deletes the ${valuesPhrase(sealed.values)} it sealed (nothing can read them without it) and binds the database to the current key`
      : 'if that key is lost, `service-mcp env-key reset --force` binds the database to the current key (it holds no env var value, so nothing is lost)',
  }
}

/** What to do about a key that is not the database's: the same advice whether it is missing or another one. */
function advice(location: EnvKeyLocation, sealed: Sealed, subject: KeySubject): string {
  const putBack = location.kind === 'file'
    ? `Put the env.key that belongs to this ${subject.noun} at ${location.file} (or set SERVICE_ENV_KEY to its content) and try again`
    : `Set SERVICE_ENV_KEY to the key that belongs to this ${subject.noun} (the content of its env.key) and try again`
  return `${subject.why} ${putBack}; ${subject.lost(sealed)}.`
}

/** The key does not open what the database sealed. */
export class EnvKeyMismatch extends ConfigError {
  override name = 'EnvKeyMismatch'
}

function mismatch(location: EnvKeyLocation, sealed: Sealed, subject: KeySubject): EnvKeyMismatch {
  const values = sealed.values > 0 ? `its ${valuesPhrase(sealed.values)}` : ''
  const what = sealed.check === undefined
    ? `${values} ${sealed.values === 1 ? 'was' : 'were'} sealed with another key`
    : `its key check${values ? ` (and ${values})` : ''} was sealed with another key`
  return new EnvKeyMismatch(`The env key ${location.describe} does not match ${subject.name}: ${what}. ${advice(location, sealed, subject)}`)
}

function missing(location: EnvKeyLocation, sealed: Sealed, subject: KeySubject): EnvKeyMismatch {
  const what = sealed.values > 0 ? `${valuesPhrase(sealed.values)} sealed with its own key` : 'a key check sealed with its own key'
  const key = location.kind === 'file' ? `The env key ${location.describe} does not exist` : `The env key is one ${location.describe}`
  return new EnvKeyMismatch(`${key}, but ${subject.name} already holds ${what}; a new key would not open them. ${advice(location, sealed, subject)}`)
}

/** True when `key` opens what the database sealed: its check, or (a database from before the check) every value. */
async function opens(key: Buffer, sealed: Sealed, repos: KeyRepos): Promise<boolean> {
  const box = new SecretBox(key)
  try {
    if (sealed.check !== undefined) return box.open(sealed.check, CHECK_AAD) === CHECK_PLAINTEXT
    for (const v of await repos.envVars.allSealed()) box.open(v.ciphertext, envVarAad(v.appId, v.name))
    return true
  } catch {
    return false
  }
}

/** Records the key check: on the repositories, or on a transaction's. */
async function writeCheck(key: Buffer, repos: Pick<TxRepos, 'serviceMeta'>): Promise<void> {
  await repos.serviceMeta.set(CHECK, new SecretBox(key).seal(CHECK_PLAINTEXT, CHECK_AAD))
}

/**
 * The env-var key of the server starting on this database: the configured one when it opens what the database sealed,
 * a new one (key file created, mode 600) only for a database that holds nothing sealed; the database records its key
 * check when it has none yet. Anything else is an EnvKeyMismatch (a ConfigError: exit code 2) saying what to do.
 */
export async function loadEnvKey(config: Config, repos: KeyRepos): Promise<Buffer> {
  const location = envKeyLocation(config)
  const sealed = await sealedIn(repos)
  let key = readEnvKey(location, config)
  if (key === null) {
    if (holdsSealed(sealed)) throw missing(location, sealed, databaseSubject(config))
    key = createEnvKey(location)
  }
  if (!(await opens(key, sealed, repos))) throw mismatch(location, sealed, databaseSubject(config))
  if (sealed.check === undefined) await writeCheck(key, repos)
  return key
}

/**
 * Whether the configured key opens what the database sealed, without creating or writing anything (`service-mcp
 * restore` before it touches a file, `service-mcp env-key check`). Throws the EnvKeyMismatch a start would (about
 * `subject`, the database by default); answers
 * how many values the key opens and, when the database holds nothing sealed yet, that any key will do.
 */
export async function checkEnvKey(config: Config, repos: KeyRepos, subject: KeySubject = databaseSubject(config)): Promise<{ location: EnvKeyLocation; values: number; bound: boolean }> {
  const location = envKeyLocation(config)
  const sealed = await sealedIn(repos)
  if (!holdsSealed(sealed)) return { location, values: 0, bound: false }
  const key = readEnvKey(location, config)
  if (key === null) throw missing(location, sealed, subject)
  if (!(await opens(key, sealed, repos))) throw mismatch(location, sealed, subject)
  return { location, values: sealed.values, bound: true }
}

/**
 * `service-mcp env-key reset`: once the key that sealed the database's values is lost, deletes them (nothing can read
 * them) and binds the database to the configured key, creating the key file when there is none. Answers how many
 * values were deleted; nothing changes when the key already matches.
 */
export async function resetEnvKey(config: Config, repos: KeyRepos): Promise<{ location: EnvKeyLocation; deleted: number; matched: boolean }> {
  const location = envKeyLocation(config)
  if (location.kind === 'throwaway') throw new ConfigError('An in-memory database has no env key to reset')
  const sealed = await sealedIn(repos)
  const existing = readEnvKey(location, config)
  if (existing !== null && (await opens(existing, sealed, repos))) {
    if (sealed.check === undefined) await writeCheck(existing, repos)
    return { location, deleted: 0, matched: true }
  }
  const key = existing ?? createEnvKey(location)
  const deleted = await repos.transaction(async (tx) => {
    const n = await tx.envVars.deleteAll()
    await writeCheck(key, tx)
    return n
  })
  return { location, deleted, matched: false }
}

/** How many values the database holds sealed (for `reset` to say what it would delete). */
export function sealedValues(repos: KeyRepos): Promise<number> {
  return repos.envVars.count()
}
