import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { request } from 'undici'
import { childEnv, track } from '../lib/children.js'
import { walkAuthorization } from '../lib/form-browser.js'
import { startServing, type Served } from './serve.js'

/**
 * Run D: the suite's authorization-server scenarios (`conformance authorization`: the metadata endpoint and the
 * authorization code grant) against the server as it ships, not the profile (which signs nobody in): `serve` on
 * 127.0.0.1 with an in-memory database and an owner whose password the runner chose.
 *
 * The code-grant scenario prints an authorization URL and waits for a person to sign in. The runner is that person: it
 * registers a public client for the suite's callback address beforehand, reads the URL from the suite's output, signs
 * in and approves in a form browser (cookies, CSRF, what Chromium sends), and follows the final redirect to the suite's
 * callback server, which then exchanges the code itself.
 *
 * The suite reads no baseline here, so the runner judges the saved checks: every one must be SUCCESS. A WARNING fails
 * the run, such as the metadata check's when `client_id_metadata_document_supported` is not advertised.
 */

const OWNER_EMAIL = 'conformance@example.com'

export interface AuthorizationOutcome {
  code: number | null
  output: string
  server: Served
}

/** A free TCP port on 127.0.0.1 for the suite's callback server (it binds the port it is given). */
async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const address = probe.address()
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no port for the callback server')
  return address.port
}

async function registerClient(origin: string, redirectUri: string): Promise<string> {
  const res = await request(`${origin}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'MCP conformance suite', redirect_uris: [redirectUri] }),
  })
  const body = (await res.body.json()) as { client_id?: string }
  if (res.statusCode !== 201 || typeof body.client_id !== 'string') throw new Error(`registration answered ${res.statusCode}: ${JSON.stringify(body)}`)
  return body.client_id
}

/**
 * Runs the suite's CLI, and when it prints an authorization URL of this server, walks it as the owner and delivers the
 * redirect to the suite's callback server. A walk that fails is reported in the output; the suite then times out
 * waiting, which fails the run.
 */
function runWithPerson(node: string, args: string[], cwd: string, origin: string, password: string, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  const child = spawn(node, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  track(child)
  let output = ''
  let walked = false
  const onOutput = (d: Buffer) => {
    output += d.toString('utf8')
    if (walked) return
    const url = output.split('\n').find((line) => line.startsWith(`${origin}/oauth/authorize?`))
    if (url === undefined) return
    walked = true
    walkAuthorization(origin, url.trim(), { email: OWNER_EMAIL, password })
      .then(({ redirect }) => request(redirect.href).then((res) => res.body.dump()))
      .catch((err: unknown) => (output += `\n[runner] the sign-in walk failed: ${err instanceof Error ? err.message : String(err)}\n`))
  }
  child.stdout!.on('data', onOutput)
  child.stderr!.on('data', onOutput)
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      output += `\n[runner] stopped after ${timeoutMs / 1000} s\n`
      child.kill('SIGKILL')
    }, timeoutMs)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

export async function runAuthorizationSuite(opts: { root: string; node: string; suiteEntry: string; out: string; timeoutMs: number; startTimeoutMs: number }): Promise<AuthorizationOutcome> {
  const password = randomBytes(18).toString('base64url')
  const server = await startServing(opts.root, [], {
    SERVICE_DATABASE: ':memory:',
    SERVICE_ENV_KEY: randomBytes(32).toString('base64'),
    SERVICE_BOOTSTRAP_EMAIL: OWNER_EMAIL,
    SERVICE_BOOTSTRAP_PASSWORD: password,
  }, opts.startTimeoutMs)
  try {
    const port = await freePort()
    const clientId = await registerClient(server.origin, `http://127.0.0.1:${port}/callback`)
    const args = [opts.suiteEntry, 'authorization', '--url', server.origin, '--client-id', clientId, '--resource', server.origin, '--port', String(port), '-o', opts.out]
    const result = await runWithPerson(opts.node, args, opts.root, server.origin, password, opts.timeoutMs)
    return { ...result, server }
  } finally {
    await server.stop()
  }
}

export const AUTHORIZATION_RESULTS = (resultsRoot: string) => join(resultsRoot, 'D')
