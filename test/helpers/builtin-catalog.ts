import { randomBytes } from 'node:crypto'
import { envVarAad } from '../../src/db/repos/env-vars.js'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Config } from '../../src/config.js'
import type { App } from '../../src/db/repos/apps.js'
import type { Deployment, DeploymentLogLine } from '../../src/db/repos/deployments.js'
import type { Role } from '../../src/lib/roles.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import { openSession, post, type RpcReply } from './mcp.js'
import { answerOf, modernPost } from './modern.js'
import { createMember, defaultOrganization } from './seed.js'
import { startServer, type TestServer } from './server.js'
import { ROOT } from './root.js'

/**
 * Shared by the tests of the built-in resources, prompts and completions (resources-builtin, prompts-builtin,
 * sdk-primitives): a server with quick pipelines, apps and deployments seeded with exact log lines, a second
 * organization, and one-line requests in both eras.
 */

export const ENV_KEY = randomBytes(32).toString('base64')
const BOX = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
const EXAMPLE = join(ROOT, 'scripts', 'pipelines', 'example.mjs')
const node = (code: string) => ({ argv: [process.execPath, '-e', code] })

export const PIPELINES = {
  default: { argv: [process.execPath, EXAMPLE] },
  /** Prints 40 lines at once, then ends after 50 ms (coalescing: many lines, few announcements). */
  burst: node("for (let i = 1; i <= 40; i++) console.log('line ' + i); setTimeout(() => process.exit(0), 50)"),
  /** Prints a line every 30 ms, 12 times (a log that keeps growing for ~360 ms). */
  drip: node("let i = 0; const t = setInterval(() => { console.log('drip ' + (++i)); if (i === 12) { clearInterval(t); process.exit(0) } }, 30)"),
  /** Waits 300 ms (time to subscribe), prints two lines, fails. */
  late: node("setTimeout(() => { console.log('building'); console.error('boom'); process.exit(3) }, 300)"),
}

export async function serve(t: Test, config: Partial<Config> = {}, extra: Parameters<typeof startServer>[1] = {}): Promise<TestServer> {
  return startServer(t, { ...extra, config: { envKey: ENV_KEY, pipelines: PIPELINES, pipelineGraceMs: 200, heartbeatMs: 60_000, ...config } })
}

export async function seedApp(server: TestServer, name: string, options: { description?: string; env?: string[]; organizationId?: string; pipeline?: string } = {}): Promise<App> {
  const repos = server.app.repos
  const organizationId = options.organizationId ?? (await defaultOrganization(server)).id
  const app = await repos.apps.create({ organizationId, name, description: options.description ?? '', pipeline: options.pipeline ?? 'default' })
  for (const k of options.env ?? []) {
    await repos.envVars.set({ organizationId, appId: app.id, name: k, ciphertext: BOX.seal('value-of-' + k, envVarAad(app.id, k)), userId: null })
  }
  return app
}

/** A finished deployment with exactly these lines, stored as the runner stores them (`at` = base + seq seconds). */
export async function seedDeployment(
  server: TestServer,
  app: App,
  options: { status?: 'succeeded' | 'failed' | 'cancelled' | 'interrupted' | 'running'; lines?: Array<[DeploymentLogLine['stream'], string]>; base?: number; exitCode?: number | null; outcome?: string } = {},
): Promise<Deployment> {
  const repos = server.app.repos
  const base = options.base ?? Date.UTC(2026, 0, 2, 3, 4, 5)
  const d = await repos.deployments.create({ organizationId: app.organizationId, appId: app.id, kind: 'deploy', pipeline: app.pipeline, createdBy: null })
  const lines = options.lines ?? [['system', `started deploy of ${app.name} with pipeline ${app.pipeline}`], ['stdout', 'building'], ['stderr', 'boom'], ['system', 'failed: the pipeline exited with code 3']]
  await repos.deployments.appendLines(lines.map(([stream, line], seq) => ({ deploymentId: d.id, seq, stream, line, at: base + seq * 1000 })))
  await repos.deployments.markRunning(d.id, base)
  const status = options.status ?? 'failed'
  if (status !== 'running') {
    const exitCode = options.exitCode !== undefined ? options.exitCode : status === 'failed' ? 3 : status === 'succeeded' ? 0 : null
    await repos.deployments.finish(d.id, status, base + lines.length * 1000, exitCode, options.outcome ?? (status === 'failed' ? 'failed: the pipeline exited with code 3' : `${status}: as seeded`))
  }
  return (await repos.deployments.byId(app.organizationId, d.id))!
}

/** The log text the resource gives for stored lines (its documented format). */
export function logText(lines: DeploymentLogLine[]): string {
  return lines.map((l) => `${new Date(l.at).toISOString()} [${l.stream}] ${l.line}\n`).join('')
}

export async function storedLines(server: TestServer, deploymentId: string): Promise<DeploymentLogLine[]> {
  return (await server.app.repos.deployments.lines(deploymentId, 100_000)).items
}

/** A second organization with a member of `role` (both scopes) and one app. */
export async function otherOrganization(server: TestServer, role: Role = 'owner') {
  const org = await server.app.repos.organizations.create({ slug: `other-${randomBytes(3).toString('hex')}`, name: 'Other Inc' })
  const member = await createMember(server, { role, organizationId: org.id })
  const app = await seedApp(server, 'gamma', { organizationId: org.id, description: 'Org B app' })
  return { org, member, app }
}

/** A legacy session (2025-11-25 unless told) and a JSON-RPC caller on it. */
export async function legacyClient(server: TestServer, key: string, version = '2025-11-25') {
  const session = await openSession(server.mcpUrl, key, version)
  let id = 100
  return {
    ...session,
    /** The whole JSON-RPC answer (result or error). */
    async rpc(method: string, params: Record<string, unknown> = {}): Promise<any> {
      const reply = await post(server.mcpUrl, { jsonrpc: '2.0', id: ++id, method, params }, session.headers)
      return replyMessage(reply, id)
    },
  }
}

/** A stateless 2026-07-28 caller (conforming headers). */
export function modernClient(server: TestServer, key: string) {
  let id = 100
  return {
    async rpc(method: string, params: Record<string, unknown> = {}): Promise<any> {
      const reply = await modernPost(server.mcpUrl, key, method, params, { id: ++id })
      const answer = answerOf(reply, id)
      if (!answer) throw new Error(`no answer to ${method}: ${reply.status} ${reply.text}`)
      return { ...answer, httpStatus: reply.status }
    },
  }
}

function replyMessage(reply: RpcReply, id: number): any {
  const message = reply.json ?? reply.messages.find((m) => m.id === id)
  if (!message) throw new Error(`no answer: ${reply.status} ${reply.text}`)
  return { ...message, httpStatus: reply.status }
}
