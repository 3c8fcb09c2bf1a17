import { statfs } from 'node:fs/promises'
import type { FastifyBaseLogger } from 'fastify'

/** Free bytes on the file system holding `folder`, for an unprivileged process (what SQLite can still write). */
export type FreeBytes = (folder: string) => Promise<number>

export const freeBytes: FreeBytes = async (folder) => {
  const s = await statfs(folder)
  return s.bavail * s.bsize
}

/**
 * Free space in the SQLite database's folder against SERVICE_DISK_MIN_FREE_MB (docs/operating.md, "Disk space").
 * A full disk makes SQLite refuse every write, for every organization; under the threshold the process reports
 * itself unready and the log warns while there is still room for the writes in flight. It logs only when the answer
 * changes (a warning when space runs low, info when it is back), so a polling balancer does not flood the log.
 */
export class DiskSpace {
  #low = false

  constructor(
    private readonly folder: string,
    private readonly minFreeBytes: number,
    private readonly log: FastifyBaseLogger,
    private readonly measure: FreeBytes = freeBytes,
  ) {}

  /** True while the free space is at or above the threshold; a folder that cannot be measured counts as low. */
  async enough(): Promise<boolean> {
    let free: number | null = null
    let failure: unknown
    try {
      free = await this.measure(this.folder)
    } catch (err) {
      failure = err
    }
    const low = free === null || free < this.minFreeBytes
    if (low && !this.#low) {
      this.log.warn(
        { freeBytes: free, minFreeBytes: this.minFreeBytes, ...(failure === undefined ? {} : { err: failure }) },
        free === null
          ? 'disk space: the database folder cannot be measured; reporting unready'
          : `disk space: ${mib(free)} free in the database's folder, under SERVICE_DISK_MIN_FREE_MB (${mib(this.minFreeBytes)}); reporting unready before writes start failing`,
      )
    }
    if (!low && this.#low) this.log.info({ freeBytes: free }, `disk space: ${mib(free!)} free in the database's folder again; ready`)
    this.#low = low
    return !low
  }
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}
