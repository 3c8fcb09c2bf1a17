import { randomBytes } from 'node:crypto'
import { envVarAad } from '../../src/db/repos/env-vars.js'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Config } from '../../src/config.js'
import type { Clock } from '../../src/lib/clock.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import type { RpcReply } from './mcp.js'
import { confirmAnswer, ELICITING, modernCall, type ModernOptions } from './modern.js'
import { defaultOrganization } from './seed.js'
import { startServer, type TestServer } from './server.js'
import { sleep } from './stream.js'
import { ROOT } from './root.js'

/**
 * Long-running work on 2026-07-28 requests (modern-deployments, modern-tasks, modern-listen tests): a server whose
 * apps run the example pipeline (its speed and failure set by the app's env vars), apps seeded with encrypted env vars,
 * and the two rounds of a confirmation (input_required, then the retry with the user's answer).
 */

export const ENV_KEY = randomBytes(32).toString('base64')
const BOX = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
export const EXAMPLE = join(ROOT, 'scripts', 'pipelines', 'example.mjs')
export const PIPELINES = {
  default: { argv: [process.execPath, EXAMPLE] },
  /** Exits 1 at once, after one line on each stream. */
  broken: { argv: [process.execPath, '-e', "console.log('building'); console.error('boom'); process.exit(1)"] },
}
export const GRACE_MS = 200
export const DEP_ID = /dep_[0-9a-z]{26}/

export async function serveModern(t: Test, config: Partial<Config> = {}, dbPath?: string, clock?: Clock): Promise<TestServer> {
  return startServer(t, {
    ...(dbPath ? { dbPath } : {}),
    ...(clock ? { clock } : {}),
    config: { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: GRACE_MS, heartbeatMs: 60_000, ...config },
  })
}

/** An app of the default organization (unless given) with env vars stored as the server stores them. */
export async function seedApp(server: TestServer, name: string, env: Record<string, string> = {}, options: { pipeline?: string; organizationId?: string } = {}) {
  const repos = server.app.repos
  const organizationId = options.organizationId ?? (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name, pipeline: options.pipeline ?? 'default' })
  for (const [k, v] of Object.entries(env)) {
    await repos.envVars.set({ organizationId, appId: app.id, name: k, ciphertext: BOX.seal(v, envVarAad(app.id, k)), userId: null })
  }
  return app
}

/** A succeeded deploy of `appId`, written directly (a rollback target). */
export async function seedSucceeded(server: TestServer, appId: string) {
  const repos = server.app.repos
  const organizationId = (await defaultOrganization(server)).id
  const d = await repos.deployments.create({ organizationId, appId, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.markRunning(d.id, Date.now())
  await repos.deployments.finish(d.id, 'succeeded', Date.now(), 0, 'succeeded: the pipeline exited with code 0')
  return (await repos.deployments.byId(organizationId, d.id))!
}

export async function deploymentCount(server: TestServer, appId?: string): Promise<number> {
  return (await server.app.repos.deployments.list((await defaultOrganization(server)).id, { ...(appId ? { appId } : {}), limit: 100, offset: 0 })).total
}

export async function deploymentRow(server: TestServer, id: string) {
  return server.app.repos.deployments.byId((await defaultOrganization(server)).id, id)
}

let askId = 0

/**
 * Round 1 of a confirmation-gated call: the input_required result (checked to be one) and its requestState.
 * `options.capabilities` defaults to ELICITING.
 */
export async function ask(t: Test, server: TestServer, key: string, tool: string, args: Record<string, unknown>, options: ModernOptions = {}): Promise<{ reply: RpcReply; result: any; requestState: string }> {
  const reply = await modernCall(server.mcpUrl, key, tool, args, { capabilities: ELICITING, id: `ask-${++askId}`, ...options })
  t.equal(reply.status, 200, `${tool}: round 1 is HTTP 200`)
  const result = reply.json?.result
  t.equal(result?.resultType, 'input_required', `${tool}: round 1 asks (input_required)`)
  t.type(result?.requestState, 'string', 'with a requestState')
  return { reply, result, requestState: result?.requestState }
}

/** The MRTR fields of a retry answering the confirmation (accept with confirm true, unless told). */
export function answered(requestState: string, answer: Record<string, unknown> = confirmAnswer()): Record<string, unknown> {
  return { requestState, inputResponses: { confirm: answer } }
}

/** Every notifications/message of logger `deployment` among `messages` (their params). */
export function deploymentLogs(messages: any[]): any[] {
  return messages.filter((m) => m.method === 'notifications/message' && m.params?.logger === 'deployment').map((m) => m.params)
}

export function progressOf(messages: any[]): any[] {
  return messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params)
}

/** Polls until `probe` returns a value (every 20 ms), or fails after `ms`. */
export async function poll<T>(probe: () => Promise<T | undefined> | T | undefined, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(20)
  }
}

/** The service error of a tool failure (its text content), or undefined when the result is not one. */
export function failureText(result: any): { code: string; message: string } | undefined {
  if (result?.isError !== true) return undefined
  return JSON.parse(result.content[0].text)
}
