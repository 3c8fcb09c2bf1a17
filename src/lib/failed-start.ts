import type { Config } from '../config.js'

/**
 * What plugins opened for a server whose start then failed: Fastify runs no onClose hook for a server that never
 * became ready, so a plugin that opens something (a database file and its lock, a Redis connection, an entry in the
 * process registry) also leaves here how to let it go, and createServer runs those after a failed start, the last
 * opened first. Keyed by the server's config object.
 */
const opened = new WeakMap<Config, Array<() => Promise<void> | void>>()

export function releaseOnFailedStart(config: Config, release: () => Promise<void> | void): void {
  let list = opened.get(config)
  if (!list) opened.set(config, (list = []))
  list.push(release)
}

/** Lets go of what a server that failed to start had opened; each release's own failure is ignored. */
export async function releaseFailedStart(config: Config): Promise<void> {
  const list = opened.get(config) ?? []
  opened.delete(config)
  for (const release of list.reverse()) {
    try {
      await release()
    } catch {
      // best effort: the start already failed with its own error
    }
  }
}
