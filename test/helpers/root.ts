import { join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packageRoot } from '../../src/lib/package-root.js'

/**
 * Where the suite runs from. `npm test` compiles it first (`npm run build:tests`: src, test and scripts into build/) and
 * runs build/test with plain node (scripts/run-tests.ts), without tsx's loader; a single file can still be run from
 * its source through tsx (`npx tap test/e2e/smoke.test.ts`). Paths to the repository's own files (README, docs,
 * drizzle, fixtures) come from ROOT, never from this file's place, which differs between the two.
 */

/** The repository: the folder holding package.json and drizzle/. */
export const ROOT = packageRoot()

/** The compiled suite's folder, `npm run build:tests`'s output. */
export const BUILD = join(ROOT, 'build')

/** True when this suite runs from build/ (as `npm test` runs it), false when from its sources through tsx. */
export const FROM_BUILD = fileURLToPath(import.meta.url).startsWith(BUILD + sep)

/**
 * The server's package entry as the tests import it: build/src/index.js beside the compiled suite, src/index.ts through
 * tsx otherwise. Code that a test writes and runs in a child process imports it from here, so the child runs the same
 * compilation of the server as the test.
 */
export const SERVER_ENTRY = FROM_BUILD ? join(BUILD, 'src', 'index.js') : join(ROOT, 'src', 'index.ts')

/** The node arguments that load TypeScript in a child process: none beside the compiled suite, tsx's hook otherwise. */
export const CHILD_LOADER: string[] = FROM_BUILD ? [] : ['--import', 'tsx']

/**
 * tap's entry as a URL, for test files that a test writes outside the repository (where 'tap' would not resolve).
 * Resolved here rather than in the test file: a test file running in a shared process (scripts/run-tests.ts) has its
 * 'tap' resolved to the subtest it runs in.
 */
export const TAP_ENTRY = import.meta.resolve('tap')
