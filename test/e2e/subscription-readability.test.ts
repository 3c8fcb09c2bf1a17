/**
 * subscriptions/listen (2026-07-28) follows only what its caller may read (docs/decisions/subscriptions.md): the
 * acknowledgement leaves out absent and foreign URIs alike, and a member removed from the organization stops hearing
 * of updates (its stream ends at its next credential check). Session subscribe checks: test/inject/resource-subscribe.test.ts;
 * demotion in both eras: test/e2e/primitives-legacy.test.ts and primitives-modern.test.ts.
 */
import t, { type Test } from 'tap'
import { otherOrganization, seedApp, seedDeployment, serve } from '../helpers/builtin-catalog.js'
import { ManualClock } from '../helpers/clock.js'
import { modernLive } from '../helpers/modern.js'
import { createMember, defaultOrganization } from '../helpers/seed.js'
import type { TestServer } from '../helpers/server.js'
import { messagesOf, type LiveStream } from '../helpers/stream.js'

const CHECK_MS = 30_000
const appUri = (id: string) => `service://apps/${id}`
const logUri = (id: string) => `service://deployments/${id}/log`

async function listen(t: Test, server: TestServer, key: string, resourceSubscriptions: string[]): Promise<LiveStream> {
  const live = await modernLive(server.mcpUrl, key, 'subscriptions/listen', { notifications: { resourceSubscriptions } }, { id: 'listen' })
  t.teardown(() => live.close())
  await live.waitFor(() => messagesOf(live).length >= 1, 3000, 'the acknowledgement')
  return live
}

const updatesOf = (live: LiveStream) => messagesOf(live).filter((m) => m.method === 'notifications/resources/updated').map((m) => m.params.uri)

t.test('the acknowledgement lists only the URIs the caller may read: absent and foreign left out alike', async (t) => {
  const server = await serve(t)
  const own = await seedApp(server, 'alpha')
  const ownDeployment = await seedDeployment(server, own)
  const b = await otherOrganization(server)
  const foreignDeployment = await seedDeployment(server, b.app)
  const asked = [
    appUri(own.id),
    appUri(b.app.id),
    logUri(ownDeployment.id),
    logUri(foreignDeployment.id),
    appUri('app_doesnotexist'),
    logUri('dep_doesnotexist'),
    'service://nothing/here',
    appUri(own.id), // asked twice, listed once
  ]
  const live = await listen(t, server, server.apiKey, asked)
  t.strictSame(messagesOf(live)[0].params.notifications, { resourceSubscriptions: [appUri(own.id), logUri(ownDeployment.id)] }, 'only its own app and log')

  const foreign = await listen(t, server, b.member.key, asked)
  t.strictSame(messagesOf(foreign)[0].params.notifications, { resourceSubscriptions: [appUri(b.app.id), logUri(foreignDeployment.id)] }, 'the other organization\'s member: only its own')

  const none = await listen(t, server, server.apiKey, [appUri(b.app.id), appUri('app_doesnotexist')])
  t.strictSame(messagesOf(none)[0].params.notifications, {}, 'nothing readable: nothing honoured, and the stream opens')
})

t.test('a removed member: its stream ends at the next check, and no update reaches it afterwards', async (t) => {
  const clock = new ManualClock()
  const server = await serve(t, { listenCheckMs: CHECK_MS }, { clock })
  const org = await defaultOrganization(server)
  const app = await seedApp(server, 'alpha')
  const member = await createMember(server, { role: 'developer' })
  const live = await listen(t, server, member.key, [appUri(app.id)])
  t.strictSame(messagesOf(live)[0].params.notifications, { resourceSubscriptions: [appUri(app.id)] })
  server.app.resources.updated(appUri(app.id), org.id)
  await live.waitFor(() => updatesOf(live).length === 1, 3000, 'the update while a member')

  t.ok(await server.app.repos.memberships.remove(member.user.id, org.id), 'the membership is removed')
  await clock.advance(CHECK_MS)
  await live.ended(3000)
  t.equal(messagesOf(live).at(-1)?.id, 'listen', 'the stream ended with the listen result')
  server.app.resources.updated(appUri(app.id), org.id)
  t.strictSame(updatesOf(live), [appUri(app.id)], 'no update after the removal')
})
