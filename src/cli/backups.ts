import { databaseTarget } from '../config.js'
import { valuesPhrase } from '../db/env-key.js'
import { backupDatabase, restoreDatabase } from '../db/sqlite/backup.js'
import { envKeyLocation } from '../lib/secret-box.js'
import { UsageError, type Context } from './command.js'

/** `service-mcp backup <file>` (db/sqlite/backup.ts). */
export async function backup(c: Context): Promise<void> {
  sqliteOnly(c, 'backup')
  const { config } = c
  const result = await backupDatabase(config.database, c.args[0]!, { force: c.options.force === 'true' })
  c.out(`backup of ${config.database} written to ${result.file} (${result.bytes} bytes, mode 600)`)
  const key = envKeyLocation(config)
  c.out(`The env key is NOT in the backup: keep the env key ${key.describe} as well, stored apart from the backup; without it the env var values in the backup cannot be read after a restore`)
}

/** `service-mcp restore <file>` (db/sqlite/backup.ts). */
export async function restore(c: Context): Promise<void> {
  sqliteOnly(c, 'restore')
  const file = c.args[0]!
  const result = await restoreDatabase(c.config, file, { ignoreEnvKey: c.options.force === 'true', warn: (message) => c.warn(message) })
  c.out(`restored ${file} into ${result.database} (SERVICE_DATABASE, ${result.bytes} bytes)`)
  if (result.kept) c.out(`the database it replaced is kept as ${result.kept}; delete it once the restored one serves`)
  const key = result.envKey
  if ('mismatch' in key) c.out('the env key does not open it (restored anyway, --force): run service-mcp env-key reset --force before serve')
  else if (key.bound) c.out(`the env key ${key.location.describe} opens it (${valuesPhrase(key.values)})`)
  else c.out('it holds no env var value yet: any env key will do')
}

/** A backup is a copy of a SQLite file: on PostgreSQL, its own tools. */
function sqliteOnly(c: Context, command: string): void {
  if (databaseTarget(c.config.database).kind === 'postgres') {
    throw new UsageError(`${command} copies a SQLite file; on PostgreSQL use its own tools (pg_dump, pg_restore)`)
  }
}
