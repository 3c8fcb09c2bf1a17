import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * A small file system of its own (tmpfs), for full-disk and read-only tests. Mounting needs root and a machine that
 * allows it: tests skip with `NO_SMALL_DISK` (the reason) where it does not.
 */

interface Teardown {
  teardown(fn: () => unknown): void
}

function probe(): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-mount-probe-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'pipe' })
    execFileSync('umount', [dir], { stdio: 'pipe' })
    return null
  } catch (err) {
    return `this machine does not allow mounting a small tmpfs: ${String((err as { stderr?: unknown }).stderr ?? err).trim()}`
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Why a small tmpfs cannot be mounted here (not root, no mount(8), a sandbox), or null when it can. */
export const NO_SMALL_DISK: string | null = probe()

/** A tmpfs of `size` (`4m`) mounted at a new folder, unmounted and removed at teardown. */
export function smallDisk(t: Teardown, size: string): string {
  const parent = mkdtempSync(join(tmpdir(), 'service-mcp-disk-'))
  const dir = join(parent, 'disk')
  mkdirSync(dir)
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir], { stdio: 'pipe' })
  t.teardown(() => {
    try {
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' })
    } catch {
      // Already gone.
    }
    rmSync(parent, { recursive: true, force: true })
  })
  return dir
}

/** Fills the file system holding `dir` to the last byte with one file; returns its path (remove it to free the space). */
export function fill(dir: string): string {
  const filler = join(dir, 'filler')
  const fd = openSync(filler, 'w')
  try {
    for (const size of [1024 * 1024, 64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size)
      try {
        for (;;) writeSync(fd, chunk)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
      }
    }
  } finally {
    closeSync(fd)
  }
  return filler
}
