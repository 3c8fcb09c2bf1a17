import t, { type Test } from 'tap'
import { newId } from '../../src/lib/crypto.js'
import { SecretBox } from '../../src/lib/secret-box.js'
import { appTools } from '../../src/plugins/tools/builtin/apps.js'
import { envTools } from '../../src/plugins/tools/builtin/env.js'
import { builtinTools } from '../../src/plugins/tools/builtin/index.js'
import type { ToolDefinition } from '../../src/plugins/tools/define.js'
import { confirmCall, readToEnd } from '../helpers/confirm.js'
import { callTool, openSession, post, type RpcReply } from '../helpers/mcp.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import { startServer, type TestServer } from '../helpers/server.js'
import { failureOf, okData, resultOf } from '../helpers/tools.js'

/** The catalog with the app and env tools, once each (they may already be part of builtinTools). */
const TOOLS = [...new Map<string, ToolDefinition<any, any>>([...builtinTools, ...appTools, ...envTools].map((d) => [d.name, d])).values()]
/** A known env key, so the test can open what the server sealed. */
const ENV_KEY = Buffer.alloc(32, 0x5a).toString('base64')
const PIPELINES = {
  default: { argv: [process.execPath, '-e', 'console.log("greeting=" + process.env.GREETING); console.log("gone=" + (process.env.GONE ?? "unset"))'] },
}
const ELICIT = { elicitation: {} }

let nextId = 2000
const rid = () => ++nextId

async function serve(t: Test): Promise<TestServer> {
  return startServer(t, { tools: TOOLS, config: { envKey: ENV_KEY, pipelines: PIPELINES } })
}

async function callRaw(server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>): Promise<RpcReply> {
  return post(server.mcpUrl, callTool(name, args, rid()), headers)
}

async function call(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>): Promise<any> {
  return resultOf(t, await callRaw(server, headers, name, args))
}

/** Calls a confirmation-gated tool on a live stream, answers elicitation/create with `answer`, returns both ends. */
async function confirmed(t: Test, server: TestServer, headers: Record<string, string>, name: string, args: Record<string, unknown>, answer: Record<string, unknown>) {
  const id = rid()
  const { live, request, reply } = await confirmCall(t, server.mcpUrl, headers, callTool(name, args, id), answer)
  t.equal(live.headers['content-type'], 'text/event-stream')
  t.equal(reply.status, 202, 'the answer is accepted with 202')
  const { responses } = await readToEnd(live, id)
  t.equal(responses.length, 1, 'one tool result on the stream')
  return { request, result: responses[0]?.result }
}

t.test('set: values are stored sealed and never returned', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const box = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'web' })).app
  const VALUE = 'postgres://user:hunter2-' + newId('v') + '@db/prod'

  const first = await callRaw(server, headers, 'service_env_set', { app_id: app.id, name: 'DATABASE_URL', value: VALUE })
  t.strictSame(okData(t, resultOf(t, first)), { app_id: app.id, name: 'DATABASE_URL', created: true })
  t.notOk(first.text.includes('hunter2'), 'the answer does not carry the value')

  const [stored] = await repos.envVars.ciphertexts(org.id, app.id)
  t.equal(stored?.name, 'DATABASE_URL')
  t.notOk(stored?.ciphertext.includes('hunter2'), 'the stored value is not the plaintext')
  t.not(stored?.ciphertext, Buffer.from(VALUE).toString('base64url'), 'nor merely encoded')
  t.equal(box.open(stored!.ciphertext, `${app.id}\u0000DATABASE_URL`), VALUE, 'it opens with the key and (app id, name)')
  t.throws(() => box.open(stored!.ciphertext, `${app.id}\u0000OTHER`), 'not under another name')
  t.throws(() => new SecretBox(Buffer.alloc(32, 1)).open(stored!.ciphertext, `${app.id}\u0000DATABASE_URL`), 'not with another key')

  const second = await callRaw(server, headers, 'service_env_set', { app_id: app.id, name: 'DATABASE_URL', value: 'replaced' })
  t.strictSame(okData(t, resultOf(t, second)), { app_id: app.id, name: 'DATABASE_URL', created: false }, 'created: false the second time')
  const [again] = await repos.envVars.ciphertexts(org.id, app.id)
  t.equal(box.open(again!.ciphertext, `${app.id}\u0000DATABASE_URL`), 'replaced', 'the value is replaced')
  t.equal((await repos.envVars.list(org.id, app.id)).length, 1, 'still one variable')

  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: '_EMPTY', value: '' }))
  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'BIG', value: 'x'.repeat(32768) }))

  const got = await callRaw(server, headers, 'service_apps_get', { app_id: app.id })
  const data = okData(t, resultOf(t, got))
  t.strictSame(data.env.map((v: { name: string }) => v.name), ['BIG', 'DATABASE_URL', '_EMPTY'], 'names, sorted')
  for (const v of data.env) t.strictSame(Object.keys(v).sort(), ['created_at', 'name', 'updated_at'], `${v.name}: name and times only`)
  const db = data.env.find((v: { name: string }) => v.name === 'DATABASE_URL')
  t.ok(db.updated_at >= db.created_at)
  t.notOk(got.text.includes('replaced') || got.text.includes('hunter2') || got.text.includes('xxxxxxxx'), 'service_apps_get never shows a value')

  // A viewer may read the names but not set values.
  const viewer = await createMember(server, { role: 'viewer' })
  const v = await openSession(server.mcpUrl, viewer.key)
  t.equal(okData(t, await call(t, server, v.headers, 'service_apps_get', { app_id: app.id })).env.length, 3)
  failureOf(t, await call(t, server, v.headers, 'service_env_set', { app_id: app.id, name: 'X', value: 'y' }), 'PERMISSION_DENIED')
  const developer = await createMember(server, { role: 'developer' })
  const d = await openSession(server.mcpUrl, developer.key)
  t.equal(okData(t, await call(t, server, d.headers, 'service_env_set', { app_id: app.id, name: 'X', value: 'y' })).created, true, 'a developer may')
})

t.test('the pipeline sees the values', async (t) => {
  const server = await serve(t)
  const org = await defaultOrganization(server)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'deployable' })).app
  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'GREETING', value: 'hello world' }))
  const run = await server.app.pipelines.start({ organizationId: org.id, appId: app.id, kind: 'deploy', createdBy: null })
  const final = await run.done
  t.equal(final.status, 'succeeded')
  const lines = (await server.app.repos.deployments.lines(final.id, 100)).items.map((l) => l.line)
  t.ok(lines.includes('greeting=hello world'), 'the runner opened the sealed value')
  t.ok(lines.includes('gone=unset'))
})

t.test('invalid arguments', async (t) => {
  const server = await serve(t)
  const { headers } = await openSession(server.mcpUrl, server.apiKey)
  const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'web' })).app
  for (const name of ['', '1ABC', 'A-B', 'A B', 'Ä', 'A'.repeat(129), 'A=B']) {
    failureOf(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name, value: 'v' }), 'INVALID_ARGUMENTS')
  }
  t.equal(okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'A'.repeat(128), value: 'v' })).created, true, '128 characters is fine')
  for (const args of [
    { app_id: app.id, name: 'BIG', value: 'x'.repeat(32769) },
    { app_id: app.id, name: 'NUM', value: 5 },
    { app_id: app.id, name: 'MISSING' },
    { name: 'NOAPP', value: 'v' },
    { app_id: 'web', name: 'X', value: 'v' },
    { app_id: app.id, name: 'X', value: 'v', extra: true },
  ]) {
    const reply = await callRaw(server, headers, 'service_env_set', args)
    failureOf(t, resultOf(t, reply), 'INVALID_ARGUMENTS')
    t.notOk(reply.text.includes('xxxxxxxxxxxxxxxx'), 'the error does not echo the value')
  }
  t.strictSame((await server.app.repos.envVars.list((await defaultOrganization(server)).id, app.id)).map((v) => v.name), ['A'.repeat(128)], 'nothing else was stored')
})

t.test('unset', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
  const app = okData(t, await call(t, server, headers, 'service_apps_create', { name: 'web' })).app
  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'GONE', value: 'bye-value!' }))
  okData(t, await call(t, server, headers, 'service_env_set', { app_id: app.id, name: 'KEPT', value: 'stay-value!' }))

  t.test('declined: the variable stays', async (t) => {
    for (const answer of [{ action: 'decline' }, { action: 'cancel' }, { action: 'accept', content: { confirm: false } }]) {
      const { request, result } = await confirmed(t, server, headers, 'service_env_unset', { app_id: app.id, name: 'GONE' }, answer)
      t.equal(request.params.mode, 'form')
      t.equal(request.params.message, `Remove env var GONE from app web (${app.id})?`)
      t.equal(request.params.requestedSchema.properties.confirm.type, 'boolean')
      failureOf(t, result, 'ELICITATION_DENIED')
      t.ok(await repos.envVars.exists(org.id, app.id, 'GONE'), `${JSON.stringify(answer)}: still set`)
    }
  })

  t.test('without the elicitation capability, or JSON only', async (t) => {
    const plain = await openSession(server.mcpUrl, server.apiKey)
    failureOf(t, await call(t, server, plain.headers, 'service_env_unset', { app_id: app.id, name: 'GONE' }), 'CAPABILITY_REQUIRED')
    const jsonOnly = await callRaw(server, { ...headers, accept: 'application/json' }, 'service_env_unset', { app_id: app.id, name: 'GONE' })
    t.match(String(jsonOnly.headers['content-type']), /^application\/json/)
    failureOf(t, resultOf(t, jsonOnly), 'CAPABILITY_REQUIRED')
    t.ok(await repos.envVars.exists(org.id, app.id, 'GONE'), 'still set')
  })

  t.test('an unknown variable is refused before asking', async (t) => {
    const reply = await callRaw(server, headers, 'service_env_unset', { app_id: app.id, name: 'NEVER_SET' })
    t.notOk(reply.messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked')
    const err = failureOf(t, resultOf(t, reply), 'RESOURCE_NOT_FOUND')
    t.match(err.message, /NEVER_SET/)
    const noApp = await callRaw(server, headers, 'service_env_unset', { app_id: newId('app'), name: 'GONE' })
    t.notOk(noApp.messages.some((m) => m.method === 'elicitation/create'), 'nobody is asked')
    failureOf(t, resultOf(t, noApp), 'RESOURCE_NOT_FOUND')
  })

  t.test('accepted: the variable is removed', async (t) => {
    const { result } = await confirmed(t, server, headers, 'service_env_unset', { app_id: app.id, name: 'GONE' }, { action: 'accept', content: { confirm: true } })
    t.strictSame(okData(t, result), { app_id: app.id, name: 'GONE', removed: true })
    t.notOk(await repos.envVars.exists(org.id, app.id, 'GONE'), 'removed')
    t.strictSame(okData(t, await call(t, server, headers, 'service_apps_get', { app_id: app.id })).env.map((v: { name: string }) => v.name), ['KEPT'])
    failureOf(t, await call(t, server, headers, 'service_env_unset', { app_id: app.id, name: 'GONE' }), 'RESOURCE_NOT_FOUND')

    const items = (await repos.audit.page(org.id, 50)).items
    const unset = items.find((e) => e.action === 'service_env_unset' && e.outcome === 'succeeded')
    t.equal(unset?.targetType, 'env_var')
    t.equal(unset?.targetId, `${app.id}/GONE`)
    t.ok(items.some((e) => e.action === 'service_env_unset.confirmation' && e.outcome === 'declined'), 'the declines are audited')
    t.ok(items.some((e) => e.action === 'service_env_unset.confirmation' && e.outcome === 'confirmed'), 'the confirmation is audited')
    const text = JSON.stringify(items)
    // Values with characters no id has: random ids (base32) once matched a bare 'bye' by chance.
    t.notOk(text.includes('bye-value!') || text.includes('stay-value!'), 'no env value in the audit log')
  })
})

t.test('env tools and an app of another organization', async (t) => {
  const server = await serve(t)
  const repos = server.app.repos
  const other = await repos.organizations.create({ slug: 'other', name: 'Other' })
  const outsider = await createMember(server, { role: 'admin', organizationId: other.id })
  const o = await openSession(server.mcpUrl, outsider.key)
  const theirs = okData(t, await call(t, server, o.headers, 'service_apps_create', { name: 'theirs' })).app
  okData(t, await call(t, server, o.headers, 'service_env_set', { app_id: theirs.id, name: 'SECRET', value: 'their-value' }))

  const { headers } = await openSession(server.mcpUrl, server.apiKey, '2025-11-25', ELICIT)
  const absent = newId('app')
  for (const [tool, extra] of [['service_env_set', { name: 'SECRET', value: 'mine' }], ['service_env_unset', { name: 'SECRET' }]] as const) {
    const foreign = await callRaw(server, headers, tool, { app_id: theirs.id, ...extra })
    const missing = await callRaw(server, headers, tool, { app_id: absent, ...extra })
    t.notOk(foreign.messages.some((m) => m.method === 'elicitation/create'), `${tool}: nobody is asked`)
    failureOf(t, resultOf(t, foreign), 'RESOURCE_NOT_FOUND')
    t.strictSame(resultOf(t, foreign), resultOf(t, missing), `${tool}: the same result as for an absent app`)
  }
  const box = new SecretBox(Buffer.from(ENV_KEY, 'base64'))
  const [stored] = await repos.envVars.ciphertexts(other.id, theirs.id)
  t.equal(box.open(stored!.ciphertext, `${theirs.id}\u0000SECRET`), 'their-value', 'their value is untouched')
  const list = okData(t, await call(t, server, o.headers, 'service_apps_get', { app_id: theirs.id }))
  t.strictSame(list.env.map((v: { name: string }) => v.name), ['SECRET'])
})
