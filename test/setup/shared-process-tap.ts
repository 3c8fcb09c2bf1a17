import type { Test } from 'tap'

/**
 * What `import t from 'tap'` gives a test file that runs in a shared process (shared-process.ts): the subtest the
 * process runs the file in, as if it were tap's root of a process of its own. The resolve hook
 * (shared-process-hook.ts) sends each test file's import of 'tap' here, with the file's URL in the query, so every file
 * gets a module instance, and a `t`, of its own.
 */

const REGISTRY = Symbol.for('service-mcp.shared-process.tests')

/** The subtest of each test file the process runs, by the file's URL. */
export function fileTests(): Map<string, Test> {
  const g = globalThis as { [REGISTRY]?: Map<string, Test> }
  return (g[REGISTRY] ??= new Map())
}

const file = new URL(import.meta.url).searchParams.get('file')
const test = file === null ? undefined : fileTests().get(file)
if (file !== null && !test) throw new Error(`${file} imports tap outside of its run in a shared process`)
// Taken: the process checks that the file's import of tap came here, so no file's tests can run on its root unseen.
if (file !== null) fileTests().delete(file)

export default test as Test
