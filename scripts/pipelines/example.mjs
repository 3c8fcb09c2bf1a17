#!/usr/bin/env node
// The example deployment pipeline of the default configuration. A real one builds and ships the app; this one prints
// the steps a deployment goes through, so the server's streaming, storage and cancellation can be seen end to end.
// It sees the app's env vars and SERVICE_APP_ID, SERVICE_APP_NAME, SERVICE_DEPLOYMENT_ID, SERVICE_DEPLOYMENT_KIND and
// (for a rollback) SERVICE_ROLLBACK_OF. Env vars that shape the run: PIPELINE_STEP_MS (pause between steps, default
// 300) and PIPELINE_FAIL_AT (a step number that fails, for trying out failures).
const env = process.env
const app = env.SERVICE_APP_NAME ?? 'app'
const kind = env.SERVICE_DEPLOYMENT_KIND ?? 'deploy'
const stepMs = Number(env.PIPELINE_STEP_MS ?? 300)
const failAt = Number(env.PIPELINE_FAIL_AT ?? 0)
const steps = kind === 'rollback'
  ? [`Fetching the artifact of ${env.SERVICE_ROLLBACK_OF}`, 'Verifying its checksum', 'Switching traffic back', 'Checking health']
  : ['Resolving build inputs', 'Installing dependencies', 'Building', 'Running checks', 'Uploading the artifact', 'Switching traffic', 'Checking health']

process.on('SIGTERM', () => {
  console.log('Received SIGTERM: stopping, nothing was switched')
  process.exit(143)
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
console.log(`${kind === 'rollback' ? 'Rolling back' : 'Deploying'} ${app} (${env.SERVICE_DEPLOYMENT_ID})`)
for (const [i, step] of steps.entries()) {
  console.log(`[${i + 1}/${steps.length}] ${step}`)
  if (failAt === i + 1) {
    console.error(`Step ${i + 1} failed: ${step}`)
    process.exit(1)
  }
  await sleep(stepMs)
}
console.log(`${app} is live`)
