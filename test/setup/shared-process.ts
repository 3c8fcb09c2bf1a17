import { register } from 'node:module'
import { pathToFileURL } from 'node:url'
import t, { type Test } from 'tap'
import { FILE_MARK } from './shared-process-hook.js'
import { fileTests } from './shared-process-tap.js'

/**
 * A process that runs test files one after another for the suite's runner (scripts/test-runner/shared-process.ts),
 * so that node's start, the loading of tap, of the server and of the helpers, and the JIT's warm-up are paid once for
 * several files instead of once per file: most of what a short test file costs.
 *
 * Each file runs as a subtest of this process's root, named by the runner, and sees that subtest as its own `t`
 * (shared-process-hook.ts): its tests, hooks, teardowns, plan and timeout belong to it alone, as in a process of its
 * own. What a process has once (its environment, globals, listeners on `process`) is shared: a file that changes them
 * says so with `// test-process: own (why)` and the runner gives it a process of its own.
 *
 * The runner hands files over IPC: `{ key, ready }` asks for the next one, `{ key, next: { name, file, timeoutMs } }`
 * or `{ key, next: null }` answers, and `{ key, setTimeout }` tells it that the file moved its deadline. A file that
 * fails ends the process, so that nothing it left behind runs beside the next file; the runner starts another.
 */

interface NextFile {
  name: string
  file: string
  timeoutMs: number
}

const key = process.env.TAP_CHILD_KEY
register('./shared-process-hook.js', import.meta.url)

function send(message: object): void {
  process.send?.({ key, ...message })
}

/** The next file to run, or null when the runner has no more for this process. */
function nextFile(): Promise<NextFile | null> {
  return new Promise((resolve) => {
    // tap unrefs the IPC channel so that it never keeps a finished process alive: held while waiting for the answer.
    process.channel?.ref()
    const onMessage = (message: { key?: unknown; next?: NextFile | null }) => {
      if (message?.key !== key || !('next' in message)) return
      process.off('message', onMessage)
      process.channel?.unref()
      resolve(message.next ?? null)
    }
    process.on('message', onMessage)
    send({ ready: true })
  })
}

/** Runs one test file in `sub`: its import runs its top level, whose t.test() calls become sub's subtests. */
async function runFile(sub: Test, next: NextFile): Promise<void> {
  const url = pathToFileURL(next.file)
  url.searchParams.set(FILE_MARK, '')
  // The runner keeps a deadline of its own for each file (it stops a process stuck in a loop that tap's timer
  // cannot interrupt): a file's t.setTimeout() moves both.
  const setTimeout = sub.setTimeout.bind(sub)
  sub.setTimeout = (ms: number) => {
    send({ setTimeout: ms })
    return setTimeout(ms)
  }
  sub.setTimeout(next.timeoutMs)
  fileTests().set(url.href, sub)
  await import(url.href)
  if (fileTests().delete(url.href)) sub.fail("the file's import of tap did not reach its subtest (test/setup/shared-process-hook.ts): its tests ran on the process's root")
}

let failed = false
for (let next = await nextFile(); next && !failed; next = failed ? null : await nextFile()) {
  const file = next
  const results = await t.test(file.name, (sub) => runFile(sub, file))
  failed = !results?.ok
}
process.disconnect?.()
if (failed) {
  // What the failed file left running (a timer, a socket, a test still waiting past its timeout) would keep the
  // process alive: it ends once tap has printed its last lines (stdout, a pipe, is written synchronously).
  t.once('complete', () => setImmediate(() => process.exit()))
  t.end()
}
