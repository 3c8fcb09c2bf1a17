import { createMigratedTemplate, startBackends } from './backends.js'

// tap's `before` (package.json "tap" section): starts this run's PostgreSQL 15 and Redis, see backends.ts. Its parent
// is the tap process, which is also the parent of every test file and of `after`.
try {
  const state = await startBackends(process.ppid)
  await createMigratedTemplate(state.postgresUrl)
} catch (error) {
  // One line: what to install, or what failed to start (its log's tail follows when there is one).
  process.stderr.write(`tap before (test/setup/backends-before.ts): ${(error as Error).message}\n`)
  process.exitCode = 1
}
