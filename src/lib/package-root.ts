import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let cached: string | undefined

/** The folder holding package.json and drizzle/, whether running from src/ (tsx) or dist/src/ (compiled). */
export function packageRoot(): string {
  if (cached) return cached
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'drizzle'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('package root not found')
    dir = parent
  }
  cached = dir
  return dir
}
