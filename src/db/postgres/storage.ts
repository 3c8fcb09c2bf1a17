import { reposOn } from '../repos/index.js'
import type { OpenOptions, Storage } from '../storage.js'
import { postgresBus } from './bus.js'
import { applicationName, coordinatedServers, lockPostgres, openPostgres } from './client.js'
import { postgresStore, uncachedCredentials } from './store.js'

/** A PostgreSQL database as storage (open.ts): a pool, migrated, then locked when asked. */
export async function openPostgresStorage(url: string, options: OpenOptions): Promise<Storage> {
  const handle = await openPostgres(url, { max: options.poolSize ?? 10, onError: (err) => options.onConnectionError?.(err) })
  let lock: { release(): Promise<void> } | null = null
  try {
    if (options.lock) lock = await lockPostgres(handle.pool, url, options.lock.mode, options.lock.events)
  } catch (err) {
    await handle.close()
    throw err
  }
  let closed: Promise<void> | undefined
  return {
    sqlite: null,
    shared: {
      coordinatedServers: () => coordinatedServers(handle.pool),
      bus: (name, onError) => postgresBus({ url, pool: handle.pool, applicationName: applicationName(name), onError }),
    },
    repos: (changes) => reposOn(postgresStore(handle), changes ?? uncachedCredentials()),
    close: () => (closed ??= (async () => {
      await lock?.release()
      await handle.close()
    })()),
  }
}
