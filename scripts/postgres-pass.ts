/**
 * The suite's second pass, on PostgreSQL: `npm run test:postgres` (part of `npm test`). Every test file that reaches
 * storage through a server (test/e2e, test/inject, test/http, test/regressions) runs again with SERVICE_TEST_DATABASE=postgres, so
 * test/helpers/server.ts puts each of its servers on a fresh database of this run's PostgreSQL (tap's `before` starts it
 * and Redis, its `after` stops them).
 *
 * A file whose database the pass would not change declares it in a line of its own, with the reason:
 *
 *   // test-backends: sqlite-only (why)   it runs its servers on SQLite files it makes (locks, disks, backups, processes)
 *   // test-backends: own (why)           it picks its backends itself (the PostgreSQL and Redis tests)
 *   // test-backends: none (why)          it runs no server
 *
 * Unit tests (test/unit) run on SQLite alone unless they say `// test-backends: both (why)`: those of the repositories,
 * which take theirs from test/helpers/unit-repos.ts.
 *
 * Running those twice would only repeat the first pass. The list of what is left out is printed with the reasons.
 *
 * `npm test` runs this pass from the compiled suite, after the first, through scripts/run-tests.ts; this script runs it
 * alone from the sources, through tap and tsx.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packageRoot } from '../src/lib/package-root.js'

const ROOT = packageRoot()
const FOLDERS = ['test/e2e', 'test/inject', 'test/http', 'test/regressions']
/** Unit tests are in the pass only when they say so (those of the repositories, through test/helpers/unit-repos.ts). */
const UNIT_FOLDER = 'test/unit'
const MARKER = /^\/\/ test-backends: (sqlite-only|own|none|both) \((.+)\)\s*$/m

export interface PassFiles {
  run: string[]
  leftOut: Array<{ file: string; kind: string; reason: string }>
}

/** The files of the PostgreSQL pass, and those left out with their reasons. */
export function postgresPassFiles(root = ROOT): PassFiles {
  const out: PassFiles = { run: [], leftOut: [] }
  for (const folder of [...FOLDERS, UNIT_FOLDER]) {
    if (!existsSync(join(root, folder))) continue
    for (const name of readdirSync(join(root, folder)).filter((n) => n.endsWith('.test.ts')).sort()) {
      const file = join(folder, name)
      const text = readFileSync(join(root, file), 'utf8')
      const marker = MARKER.exec(text)
      // A misspelt declaration would silently put the file back in the pass, or keep it out without a reason.
      if (!marker && /^\/\/ test-backends:/m.test(text)) throw new Error(`${file}: a test-backends line must read "// test-backends: sqlite-only|own|none|both (why)"`)
      const kind = marker?.[1] ?? (folder === UNIT_FOLDER ? 'unit' : 'both')
      if (kind === 'both') out.run.push(file)
      else if (kind !== 'unit') out.leftOut.push({ file, kind, reason: marker![2]! })
    }
  }
  return out
}

/** A test file's compiled counterpart in build/ (test/e2e/a.test.ts → build/test/e2e/a.test.js). */
export function compiledTestFile(file: string): string {
  return join('build', file.replace(/\.ts$/, '.js'))
}

function main(): number {
  const { run, leftOut } = postgresPassFiles()
  console.log(`PostgreSQL pass: ${run.length} test files on PostgreSQL; left out (${leftOut.length}), each run once by the first pass:`)
  for (const l of leftOut) console.log(`  ${l.file}: ${l.kind} (${l.reason})`)
  const tap = join(ROOT, 'node_modules', '.bin', 'tap')
  const result = spawnSync(tap, run, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, SERVICE_TEST_DATABASE: 'postgres' } })
  if (result.error) throw result.error
  return result.status ?? 1
}

if (relative(process.argv[1] ?? '', fileURLToPath(import.meta.url)) === '') process.exitCode = main()
