import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

/**
 * The latest modification time of the files under `dir`: whether a build is newer than its sources, for the tests'
 * CLI and the conformance servers, which start the build when it is fresh and the sources through tsx otherwise.
 */
export function newestIn(dir: string): number {
  let newest = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name)
    newest = Math.max(newest, e.isDirectory() ? newestIn(path) : statSync(path).mtimeMs)
  }
  return newest
}
