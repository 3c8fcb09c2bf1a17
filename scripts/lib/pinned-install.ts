/**
 * Installs a pinned set of npm packages (a folder holding package.json and package-lock.json) into a folder of its
 * own with `npm ci`, never into the project's node_modules: a `node` binary there would shadow the Node that builds
 * the SQLite addon. Reused while the manifest and lockfile do not change.
 */
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { childEnv, execute } from './children.js'

const FILES = ['package.json', 'package-lock.json']

export interface PinnedInstall {
  /** Folder with the manifest and lockfile (committed). */
  source: string
  /** Folder to install into (ignored by git). */
  target: string
  /** A file under `target` that exists once the install worked. */
  probe: string
}

/** Installs unless the same manifest and lockfile are installed already; says which it did. */
export async function ensurePinnedInstall({ source, target, probe }: PinnedInstall): Promise<{ reused: boolean; seconds: number }> {
  const stamp = createHash('sha256').update(FILES.map((f) => readFileSync(join(source, f), 'utf8')).join('\0')).digest('hex')
  const stampFile = join(target, '.installed')
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp && existsSync(join(target, probe))) {
    return { reused: true, seconds: 0 }
  }
  rmSync(target, { recursive: true, force: true })
  mkdirSync(target, { recursive: true })
  for (const f of FILES) copyFileSync(join(source, f), join(target, f))
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const result = await execute(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: target, env: childEnv(), timeoutMs: 10 * 60_000 })
  if (result.code !== 0 || !existsSync(join(target, probe))) {
    throw new Error(`npm ci in ${target} failed (exit ${result.code}${result.timedOut ? ', timed out' : ''}):\n${result.output}`)
  }
  writeFileSync(stampFile, stamp)
  return { reused: false, seconds: result.seconds }
}
