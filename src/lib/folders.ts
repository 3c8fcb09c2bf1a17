import { mkdirSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/**
 * `mkdir -p`, one level at a time. Node's own recursive mkdir loops forever on a file system that answers ENOENT for a
 * folder whose parent exists (under /proc or /sys): here every failure is thrown as it is, with `path` the folder that
 * could not be made. Created folders get `mode` (the umask applies, as for mkdir).
 */
export function makeFolders(folder: string, mode: number): void {
  const missing: string[] = []
  for (let dir = resolve(folder); ; dir = dirname(dir)) {
    try {
      if (statSync(dir).isDirectory()) break
      throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: dir })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
    missing.push(dir)
    if (dirname(dir) === dir) break
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, { mode })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}
