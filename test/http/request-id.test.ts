import t, { type Test } from 'tap'
import type { Config } from '../../src/config.js'
import { LOGGED_APP_KEY, loggedApp } from '../helpers/logged-app.js'

/**
 * X-Request-Id: a well-formed one from the client (or its proxy) is kept, answered and logged; anything else is
 * replaced by a fresh UUID and appears nowhere, neither in the response nor in the log.
 */

const KEY = LOGGED_APP_KEY
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const app = loggedApp

t.test('a well-formed X-Request-Id is kept: in the response header and in every log line of the request', async (t) => {
  const { app: a, log } = await app(t, { accessLog: true })
  for (const id of ['abc', 'req-42', 'a.b_c:d@e/f-0', '0af7651916cd43dd8448eb211c80319c', 'x'.repeat(128)]) {
    const res = await a.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': id } })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['x-request-id'], id, `${id.slice(0, 20)}… answered as it came`)
    const line = log.map((l) => JSON.parse(l)).find((l) => l.msg === 'request completed' && l.reqId === id)
    t.ok(line, 'and logged with it')
  }
  // On refusals too (the contract: every response, errors included).
  const refused = await a.inject({ method: 'POST', url: '/mcp', headers: { 'x-request-id': 'proxy-7', 'content-type': 'application/json' }, payload: '{}' })
  t.equal(refused.statusCode, 401)
  t.equal(refused.headers['x-request-id'], 'proxy-7')
  const missing = await a.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': 'proxy-8' } })
  t.equal(missing.statusCode, 404)
  t.equal(missing.headers['x-request-id'], 'proxy-8')
})

t.test('a malformed X-Request-Id is replaced by a fresh UUID and never echoed or logged', async (t) => {
  const { app: a, log } = await app(t, { accessLog: true })
  const bad = ['has space', 'x'.repeat(129), 'quote"d', '<script>', 'ünïcode', 'semi;colon', 'tab\there', 'a,b', '']
  const seen = new Set<string>()
  for (const id of bad) {
    const res = await a.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': id } })
    const answered = String(res.headers['x-request-id'])
    t.match(answered, UUID, `${JSON.stringify(id.slice(0, 20))} → a UUID`)
    t.not(answered, id)
    t.notOk(seen.has(answered), 'a fresh one each time')
    seen.add(answered)
  }
  // Two X-Request-Id headers arrive joined ("a, b"): malformed, so replaced.
  const twice = await a.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': ['one', 'two'] } })
  t.match(String(twice.headers['x-request-id']), UUID)
  const text = log.join('')
  for (const id of ['has space', 'x'.repeat(129), 'quote\\"d', '<script>', 'ünïcode', 'semi;colon', 'one, two']) t.notOk(text.includes(id), `${JSON.stringify(id.slice(0, 20))} is not in the log`)
  t.equal(log.filter((l) => JSON.parse(l).msg === 'request completed').length, bad.length + 1, 'every request was logged, under its UUID')
})

t.test('without one, each request gets a fresh UUID', async (t) => {
  const { app: a } = await app(t)
  const ids = new Set<string>()
  for (let i = 0; i < 5; i++) ids.add(String((await a.inject({ method: 'GET', url: '/healthz' })).headers['x-request-id']))
  t.equal(ids.size, 5)
  for (const id of ids) t.match(id, UUID)
})
