/**
 * A first start writes its owner and SERVICE_BOOTSTRAP_API_KEY once it listens (so that a start that cannot listen
 * leaves the database empty). A client that called with that key as soon as the port answered, in that moment, was
 * told 401 INVALID_TOKEN: found by `npm run bench:processes`, whose servers answered the pre-warm load with 401 now and
 * then. Requests that arrive before the bootstrap is written now wait for it.
 */
import t from 'tap'
import { createServer } from '../../src/index.js'
import { modernCall, answerOf } from '../helpers/modern.js'
import { OWNER_EMAIL, OWNER_KEY, OWNER_PASSWORD, tempDatabase, UNLIMITED, onPostgres } from '../helpers/server.js'
import { postgresDatabase } from '../helpers/backends.js'

t.test('a request with the bootstrap key that arrives while the owner is being written waits for it', async (t) => {
  const database = onPostgres() ? await postgresDatabase(t, { migrated: true }) : tempDatabase(t)
  const server = await createServer({
    env: {},
    logger: false,
    onBootstrap: () => {},
    config: {
      host: '127.0.0.1', port: 0, database, logLevel: 'silent', stopSettleMs: 0, ...UNLIMITED,
      bootstrapEmail: OWNER_EMAIL, bootstrapPassword: OWNER_PASSWORD, bootstrapApiKey: OWNER_KEY,
      ...(onPostgres() ? { envKey: Buffer.alloc(32, 0x62).toString('base64') } : {}),
    },
  })
  t.teardown(() => server.close())

  // The bootstrap's one transaction is held until the test has a request in flight.
  const repos = server.app.repos
  const transaction = repos.transaction.bind(repos)
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  let bootstrapping!: () => void
  const started = new Promise<void>((resolve) => (bootstrapping = resolve))
  repos.transaction = (async (fn: Parameters<typeof transaction>[0]) => {
    bootstrapping()
    await held
    repos.transaction = transaction
    return transaction(fn)
  }) as typeof repos.transaction

  const listening = server.listen()
  await started
  t.ok(server.app.server.listening, 'the port answers while the owner is being written')
  const port = (server.app.server.address() as { port: number }).port
  let answered = false
  const arrived = new Promise((resolve) => server.app.server.once('request', resolve))
  const call = modernCall(`http://127.0.0.1:${port}/mcp`, OWNER_KEY, 'service_whoami').then((reply) => {
    answered = true
    return reply
  })
  await arrived
  // Before the fix the request was answered 401 within milliseconds of arriving; given far more than that, it waits.
  await Promise.race([call, new Promise((resolve) => setTimeout(resolve, 200))])
  t.equal(answered, false, 'the request waits rather than being answered')
  release()
  await listening
  const reply = await call
  t.equal(reply.status, 200, 'then it is served')
  t.equal(answerOf(reply)?.result?.isError, false, 'with the bootstrap key, as the owner')
})
