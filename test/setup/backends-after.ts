import { stopBackends } from './backends.js'

// tap's `after` (package.json "tap" section): stops this run's PostgreSQL and Redis and removes everything `before`
// wrote. tap runs it whether tests passed or not; a run it never reaches (killed) is cleaned by the next `before`.
try {
  await stopBackends(process.ppid)
} catch (error) {
  process.stderr.write(`tap after (test/setup/backends-after.ts): ${(error as Error).message}\n`)
  process.exitCode = 1
}
