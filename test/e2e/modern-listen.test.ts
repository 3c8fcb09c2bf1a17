/**
 * subscriptions/listen (2026-07-28): a long-lived SSE answer that acknowledges the honoured filter first, tags every
 * message with the listen request's id, sends tools/list_changed when the caller's visible tools change and
 * notifications/tasks for the caller's own tasks, beats its heartbeat, ends with the listen result when the credential
 * is revoked or the server stops, and counts against a per-member limit until its client closes it.
 */
import t, { type Test } from 'tap'
import { SUBSCRIPTION_ID_KEY, SERVER_INFO_KEY, ELICITING, WITH_TASKS, TASKS_EXTENSION, modernLive, modernPost, modernCall, type ModernOptions } from '../helpers/modern.js'
import { answered, ask, poll, seedApp, serveModern } from '../helpers/modern-runs.js'
import { createMember } from '../helpers/seed.js'
import { ManualClock } from '../helpers/clock.js'
import type { TestServer } from '../helpers/server.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'

// What a listen stream does at its checks (SERVICE_LISTEN_CHECK_MS), its heartbeats and the revocation watch is decided
// by the server's manual clock (docs/decisions/clock.md): the tests move it past a check instead of waiting for one.
const CHECK_MS = 30_000
const HEARTBEAT_MS = 25_000
const ACK = 'notifications/subscriptions/acknowledged'

/** A server whose time moves only with `clock.advance`. */
async function serveClocked(t: Test, config: Record<string, unknown> = {}): Promise<{ server: TestServer; clock: ManualClock }> {
  const clock = new ManualClock()
  const server = await serveModern(t, { listenCheckMs: CHECK_MS, heartbeatMs: HEARTBEAT_MS, ...config }, undefined, clock)
  return { server, clock }
}

/**
 * What the listen streams received before the next heartbeat, which the test makes the server send now (moving the clock
 * to it): events arrive in order, so anything the server sent on them before has arrived then.
 */
async function beforeHeartbeat(clock: ManualClock, ...streams: LiveStream[]): Promise<void> {
  const beats = streams.map((live) => heartbeats(live))
  await clock.advance(HEARTBEAT_MS)
  await Promise.all(streams.map((live, i) => live.waitFor(() => heartbeats(live) > beats[i]!, 5000, 'the next heartbeat')))
}

const heartbeats = (live: LiveStream) => live.parsed().comments.filter((c) => c === 'heartbeat').length

async function listen(t: Test, server: TestServer, key: string, notifications: Record<string, unknown>, options: ModernOptions = {}): Promise<LiveStream> {
  const live = await modernLive(server.mcpUrl, key, 'subscriptions/listen', { notifications }, { id: 'listen', ...options })
  t.teardown(() => live.close())
  return live
}

/** The first message of a listen stream, once it arrived. */
async function ackOf(live: LiveStream): Promise<any> {
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  return messagesOf(live)[0]
}

function subscriptionIdOf(message: any): unknown {
  return (message.params ?? message.result)?._meta?.[SUBSCRIPTION_ID_KEY]
}

function toolNames(reply: any): string[] {
  return reply.json.result.tools.map((x: any) => x.name)
}

/** The ending of a listen stream: the body ends, and its last message is the listen result. */
async function endsWithResult(t: Test, live: LiveStream, id: string | number, ms = 3000) {
  await live.ended(ms)
  t.ok(live.endedByServer, 'the server ended the body')
  const messages = messagesOf(live)
  const last = messages.at(-1)
  t.equal(last?.id, id, 'the last message answers the listen request')
  t.equal(last?.result?.resultType, 'complete')
  t.equal(last?.result?._meta?.[SUBSCRIPTION_ID_KEY], id, 'the result carries the subscription id')
  t.match(last?.result?._meta?.[SERVER_INFO_KEY], { name: 'service-mcp' })
  t.strictSame(Object.keys(last?.result ?? {}).sort(), ['_meta', 'resultType'], 'and nothing else')
  t.ok(live.text().endsWith('\n\n'), 'the body ends after a complete event')
}

t.test('the acknowledgement comes first with the honoured subset; every message carries the subscription id', async (t) => {
  const { server, clock } = await serveClocked(t)
  for (const id of ['listen-a', 42] as const) {
    await t.test(`listen id ${JSON.stringify(id)}`, async (t) => {
      const dev = await createMember(server, { role: 'developer' })
      const live = await listen(t, server, dev.key, { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['x'] }, { id })
      t.equal(live.status, 200)
      t.equal(live.headers['content-type'], 'text/event-stream')
      t.equal(live.headers['x-accel-buffering'], 'no')
      t.equal(live.headers['mcp-session-id'], undefined, 'no Mcp-Session-Id')
      const ack = await ackOf(live)
      t.equal(ack.method, ACK, 'the first message is the acknowledgement')
      t.notOk('id' in ack, 'a notification')
      t.strictSame(ack.params.notifications, { toolsListChanged: true, promptsListChanged: true }, 'what is honoured: a resource nothing serves is left out')
      t.equal(ack.params._meta[SUBSCRIPTION_ID_KEY], id, 'tagged with the listen request id (same type)')

      await server.app.repos.memberships.upsert({ userId: dev.user.id, organizationId: dev.membership.organizationId, role: 'viewer' })
      await clock.advance(CHECK_MS)
      await live.waitFor(() => messagesOf(live).some((m) => m.method === 'notifications/tools/list_changed'), 3000, 'tools/list_changed')
      t.notMatch(live.text(), /^id:/m, 'no event ids')
      await server.app.repos.apiKeys.revoke(dev.keyId)
      server.app.auth.revoked(`key:${dev.keyId}`)
      await endsWithResult(t, live, id)
      const messages = messagesOf(live)
      t.strictSame(messages.map((m) => m.method ?? 'result'), [ACK, 'notifications/tools/list_changed', 'result'])
      t.ok(messages.every((m) => subscriptionIdOf(m) === id), 'every message carries the subscription id')
    })
  }
})

t.test('a role change sends tools/list_changed to streams that asked for it, and only to them', async (t) => {
  const { server, clock } = await serveClocked(t)
  const dev = await createMember(server, { role: 'developer' })
  const before = toolNames(await modernPost(server.mcpUrl, dev.key, 'tools/list'))
  t.ok(before.includes('service_apps_create'), 'a developer sees the write tools')

  const tools = await listen(t, server, dev.key, { toolsListChanged: true }, { id: 'tools' })
  const prompts = await listen(t, server, dev.key, { promptsListChanged: true }, { id: 'prompts' })
  t.strictSame((await ackOf(tools)).params.notifications, { toolsListChanged: true })
  t.strictSame((await ackOf(prompts)).params.notifications, { promptsListChanged: true }, 'prompts honoured')

  // Nothing changes: nothing is sent over several checks.
  await clock.advance(CHECK_MS * 4)
  await beforeHeartbeat(clock, tools)
  t.equal(messagesOf(tools).length, 1, 'no notification without a change')

  await server.app.repos.memberships.upsert({ userId: dev.user.id, organizationId: dev.membership.organizationId, role: 'viewer' })
  await clock.advance(CHECK_MS)
  await tools.waitFor(() => messagesOf(tools).some((m) => m.method === 'notifications/tools/list_changed'), 3000, 'tools/list_changed')
  const changed = messagesOf(tools).find((m) => m.method === 'notifications/tools/list_changed')
  t.equal(changed.params._meta[SUBSCRIPTION_ID_KEY], 'tools')
  t.strictSame(Object.keys(changed.params), ['_meta'], 'no other params')

  await clock.advance(CHECK_MS * 4)
  await beforeHeartbeat(clock, tools, prompts)
  t.equal(messagesOf(tools).filter((m) => m.method === 'notifications/tools/list_changed').length, 1, 'once per change')
  t.strictSame(messagesOf(prompts).map((m) => m.method), [ACK], 'the stream that asked only for prompts got nothing (no prompt changed)')
  t.notOk(prompts.endedByServer, 'and is still open')

  const after = toolNames(await modernPost(server.mcpUrl, dev.key, 'tools/list'))
  t.notOk(after.includes('service_apps_create'), 'tools/list reflects the change')
  t.ok(after.includes('service_whoami'))
  t.ok(after.length < before.length)

  // Back to developer: another change, another notification.
  await server.app.repos.memberships.upsert({ userId: dev.user.id, organizationId: dev.membership.organizationId, role: 'developer' })
  await clock.advance(CHECK_MS)
  await tools.waitFor(() => messagesOf(tools).filter((m) => m.method === 'notifications/tools/list_changed').length === 2, 3000, 'the second tools/list_changed')
  t.strictSame(toolNames(await modernPost(server.mcpUrl, dev.key, 'tools/list')), before)
})

t.test('idle listen streams carry heartbeat comments', async (t) => {
  const { server, clock } = await serveClocked(t)
  const live = await listen(t, server, server.apiKey, { toolsListChanged: true })
  await ackOf(live)
  await clock.advance(HEARTBEAT_MS)
  await live.waitFor((text) => (text.match(/^: heartbeat$/gm) ?? []).length === 1, 3000, 'the heartbeat at SERVICE_HEARTBEAT_MS')
  await clock.advance(HEARTBEAT_MS)
  await live.waitFor((text) => (text.match(/^: heartbeat$/gm) ?? []).length === 2, 3000, 'the next one')
  t.equal(heartbeats(live), 2, ': heartbeat comments, one per interval')
  t.equal(messagesOf(live).length, 1, 'heartbeats are not messages')
})

t.test('task notifications for the caller\'s own tasks, with the tasks extension', async (t) => {
  const { server, clock } = await serveClocked(t)
  const app = await seedApp(server, 'web', { PIPELINE_STEP_MS: '100' })
  const args = { app_id: app.id }
  const { requestState } = await ask(t, server, server.apiKey, 'service_deployments_create', args, { capabilities: WITH_TASKS })
  const created = await modernCall(server.mcpUrl, server.apiKey, 'service_deployments_create', args, { capabilities: WITH_TASKS, id: 'deploy', extra: answered(requestState) })
  const taskId = created.json.result.taskId as string
  t.type(taskId, 'string', 'a task was created')

  // Another member's listen may not follow it.
  const colleague = await createMember(server, { role: 'admin' })
  const foreign = await listen(t, server, colleague.key, { taskIds: [taskId] }, { id: 'foreign', capabilities: WITH_TASKS })
  t.strictSame((await ackOf(foreign)).params.notifications, { taskIds: [] }, 'another member\'s task is not honoured')

  const live = await listen(t, server, server.apiKey, { taskIds: [taskId, 'no-such-task'] }, { id: 'tasks', capabilities: WITH_TASKS })
  const ack = await ackOf(live)
  t.strictSame(ack.params.notifications, { taskIds: [taskId] }, 'only the caller\'s existing task is honoured')

  await live.waitFor(() => messagesOf(live).some((m) => m.method === 'notifications/tasks' && m.params.status === 'completed'), 8000, 'the completed task')
  const note = messagesOf(live).find((m) => m.method === 'notifications/tasks' && m.params.status === 'completed')
  t.equal(note.params.taskId, taskId)
  t.equal(note.params._meta[SUBSCRIPTION_ID_KEY], 'tasks')
  t.type(note.params.createdAt, 'string')
  t.type(note.params.lastUpdatedAt, 'string')
  t.equal(note.params.result?.structuredContent?.deployment?.status, 'succeeded', 'the DetailedTask with its result')
  t.notOk('resultType' in note.params, 'a notification, not a result')
  const got = await modernPost(server.mcpUrl, server.apiKey, 'tasks/get', { taskId }, { capabilities: WITH_TASKS })
  const { resultType: _r, _meta: _m, ...detailed } = got.json.result
  const { _meta: _n, ...notified } = note.params
  t.strictSame(notified, detailed, 'the same task as tasks/get shows it')
  t.ok(messagesOf(live).every((m) => subscriptionIdOf(m) === 'tasks'))
  t.ok(messagesOf(live).filter((m) => m.method !== ACK).every((m) => m.method === 'notifications/tasks'), 'nothing but task notifications')

  await clock.advance(CHECK_MS * 3)
  await beforeHeartbeat(clock, foreign)
  t.strictSame(messagesOf(foreign).map((m) => m.method), [ACK], 'the other member heard nothing')

  const without = await modernPost(server.mcpUrl, server.apiKey, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, { capabilities: ELICITING, id: 'no-ext' })
  t.equal(without.status, 400, 'taskIds without the extension: 400')
  t.equal(without.json?.error?.code, -32021)
  t.equal(without.json?.id, 'no-ext')
  t.strictSame(without.json?.error?.data?.requiredCapabilities, { extensions: { [TASKS_EXTENSION]: {} } })
})

t.test('revoking the credential ends the stream with the listen result', async (t) => {
  await t.test('reported revocation (repository + auth.revoked)', async (t) => {
    const server = await serveModern(t, { listenCheckMs: 60_000, sessionSweepMs: 60_000 })
    const member = await createMember(server, { role: 'developer' })
    const live = await listen(t, server, member.key, { toolsListChanged: true }, { id: 'rev-1' })
    await ackOf(live)
    await server.app.repos.apiKeys.revoke(member.keyId)
    server.app.auth.revoked(`key:${member.keyId}`)
    await endsWithResult(t, live, 'rev-1', 1000)
  })
  await t.test('found by the stream\'s own credential check', async (t) => {
    const { server, clock } = await serveClocked(t, { sessionSweepMs: 100 * CHECK_MS })
    const member = await createMember(server, { role: 'developer' })
    const live = await listen(t, server, member.key, { toolsListChanged: true }, { id: 7 })
    await ackOf(live)
    await server.app.repos.apiKeys.revoke(member.keyId)
    await clock.advance(CHECK_MS)
    await endsWithResult(t, live, 7, 2000)
    t.notOk(messagesOf(live).some((m) => m.method === 'notifications/tools/list_changed'), 'no tools/list_changed for a lapsed credential')
  })
  await t.test('found by the revocation watcher', async (t) => {
    const SWEEP_MS = 60_000
    const { server, clock } = await serveClocked(t, { listenCheckMs: 100 * SWEEP_MS, sessionSweepMs: SWEEP_MS })
    const member = await createMember(server, { role: 'developer' })
    const live = await listen(t, server, member.key, {}, { id: 'rev-3' })
    await ackOf(live)
    await server.app.repos.apiKeys.revoke(member.keyId)
    await clock.advance(SWEEP_MS)
    await endsWithResult(t, live, 'rev-3', 2000)
    const again = await modernPost(server.mcpUrl, member.key, 'subscriptions/listen', { notifications: {} })
    t.equal(again.status, 401, 'a new listen with the revoked key is refused')
    t.equal(again.json?.error?.code, 'TOKEN_REVOKED')
  })
})

t.test('server shutdown ends every open stream with the listen result', async (t) => {
  const server = await serveModern(t)
  const a = await listen(t, server, server.apiKey, { toolsListChanged: true }, { id: 'down-a' })
  const b = await listen(t, server, server.apiKey, {}, { id: 9 })
  await ackOf(a)
  await ackOf(b)
  await server.close()
  await endsWithResult(t, a, 'down-a')
  await endsWithResult(t, b, 9)
})

t.test('a member holds at most listenMaxPerMember streams; closing one frees its slot', async (t) => {
  const server = await serveModern(t, { listenMaxPerMember: 2 })
  const first = await listen(t, server, server.apiKey, {}, { id: 'one' })
  const second = await listen(t, server, server.apiKey, {}, { id: 'two' })
  await ackOf(first)
  await ackOf(second)

  const third = await modernPost(server.mcpUrl, server.apiKey, 'subscriptions/listen', { notifications: {} }, { id: 'three' })
  t.equal(third.status, 429, 'a third stream: 429')
  t.equal(third.json?.error?.code, 'RATE_LIMITED', 'service body')
  t.type(third.json?.error?.message, 'string')
  t.type(third.json?.error?.action, 'string')
  t.ok(Number(third.headers['retry-after']) > 0, 'Retry-After')
  t.equal(third.headers['x-ratelimit-limit'], '2')
  t.equal(third.headers['x-ratelimit-remaining'], '0')

  const other = await createMember(server, { role: 'viewer' })
  const theirs = await listen(t, server, other.key, {}, { id: 'theirs' })
  t.equal(theirs.status, 200, 'another member has slots of its own')
  await ackOf(theirs)

  first.close()
  const fourth = await poll(async () => {
    const live = await modernLive(server.mcpUrl, server.apiKey, 'subscriptions/listen', { notifications: {} }, { id: 'four' })
    t.teardown(() => live.close())
    if (live.status === 429) {
      await live.ended(1000)
      return undefined
    }
    return live
  }, 3000, 'the server to notice the closed stream')
  t.equal(fourth.status, 200, 'a new stream is accepted once one was closed')
  t.equal((await ackOf(fourth)).method, ACK)
  t.notOk(second.endedByServer, 'the other stream stays open')
})

t.test('refusals: a client accepting only JSON (406), notifications missing (-32602)', async (t) => {
  const server = await serveModern(t)
  const json = await modernPost(server.mcpUrl, server.apiKey, 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { headers: { accept: 'application/json' } })
  t.equal(json.status, 406)
  t.match(json.headers['content-type'], /^application\/json/)
  t.equal(json.json?.error?.code, 'NOT_ACCEPTABLE', 'service body')
  t.type(json.json?.error?.message, 'string')
  t.type(json.json?.error?.action, 'string')

  const missing = await modernPost(server.mcpUrl, server.apiKey, 'subscriptions/listen', {}, { id: 'nothing' })
  t.equal(missing.status, 200)
  t.equal(missing.json?.error?.code, -32602)
  t.equal(missing.json?.error?.data?.code, 'INVALID_PARAMS')
  t.equal(missing.json?.id, 'nothing')

  // A refused listen holds no slot.
  const ok = await listen(t, server, server.apiKey, {})
  t.equal(ok.status, 200)
  t.equal((await ackOf(ok)).method, ACK)
})
