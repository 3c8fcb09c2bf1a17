#!/usr/bin/env node
// The example deployment pipeline of the default configuration. A real one builds and ships the app; this one prints
// the steps a deployment goes through, so the server's streaming, storage and cancellation can be seen end to end.
// It sees the app's env vars and SERVICE_APP_ID, SERVICE_APP_NAME, SERVICE_DEPLOYMENT_ID, SERVICE_DEPLOYMENT_KIND and
// (for a rollback) SERVICE_ROLLBACK_OF. Env vars that shape the run: PIPELINE_STEP_MS (pause between steps, default
// 300), PIPELINE_FAIL_AT (a step number that fails, for trying out failures) and ASK_BEFORE_SWITCH (`1`: ask the user
// before switching traffic, docs/tools.md#pipeline-questions; on no, the run fails and nothing is switched).
import { Socket } from 'node:net'

const env = process.env
const app = env.SERVICE_APP_NAME ?? 'app'
const kind = env.SERVICE_DEPLOYMENT_KIND ?? 'deploy'
const stepMs = Number(env.PIPELINE_STEP_MS ?? 300)
const failAt = Number(env.PIPELINE_FAIL_AT ?? 0)
const askBeforeSwitch = env.ASK_BEFORE_SWITCH === '1'
const SWITCH = kind === 'rollback' ? 'Switching traffic back' : 'Switching traffic'
const steps = kind === 'rollback'
  ? [`Fetching the artifact of ${env.SERVICE_ROLLBACK_OF}`, 'Verifying its checksum', SWITCH, 'Checking health']
  : ['Resolving build inputs', 'Installing dependencies', 'Building', 'Running checks', 'Uploading the artifact', SWITCH, 'Checking health']

process.on('SIGTERM', () => {
  console.log('Received SIGTERM: stopping, nothing was switched')
  process.exit(143)
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Asks the user `question` through the server: one marker line on stdout, then one line (`yes` or `no`) read from the
 * answer descriptor. Anything else, or no descriptor (run by hand), is no.
 */
async function ask(question) {
  console.log(`::service-mcp::ask ${question}`)
  let answers
  try {
    answers = new Socket({ fd: Number(env.SERVICE_ANSWER_FD ?? 3), readable: true, writable: false })
  } catch {
    return false
  }
  answers.setEncoding('utf8')
  let got = ''
  try {
    for await (const chunk of answers) {
      got += chunk
      if (got.includes('\n')) break
    }
  } catch {
    // The descriptor is not readable: nobody answers.
  } finally {
    answers.destroy()
  }
  return got.split('\n')[0].trim() === 'yes'
}

const release = env.SERVICE_DEPLOYMENT_ID
console.log(`${kind === 'rollback' ? 'Rolling back' : 'Deploying'} ${app} (${release})`)
for (const [i, step] of steps.entries()) {
  if (step === SWITCH && askBeforeSwitch && !(await ask(`Switch traffic to ${release}?`))) {
    console.error(`Not confirmed: traffic not switched to ${release}`)
    process.exit(1)
  }
  console.log(`[${i + 1}/${steps.length}] ${step}`)
  if (failAt === i + 1) {
    console.error(`Step ${i + 1} failed: ${step}`)
    process.exit(1)
  }
  await sleep(stepMs)
}
console.log(`${app} is live`)
