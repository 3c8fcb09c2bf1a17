import { Writable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import t from 'tap'
import { lazyChildLoggerFactory } from '../../src/lib/lazy-logger.js'

// Request loggers are made on first use: a line below the level makes nothing, a line at or above it is written by
// the real child, with the request's bindings, exactly as an eager child would.

function logger(level: string) {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({ write(chunk, _e, done) { lines.push(JSON.parse(String(chunk))); done() } })
  const parent = pino({ level }, stream) as unknown as FastifyBaseLogger
  // Counts the children made, without touching the parent (pino children inherit from their parent).
  let children = 0
  const counted = Object.create(parent) as FastifyBaseLogger
  counted.child = (b, o) => { children++; return parent.child(b, o) }
  const make = (reqId: string) => lazyChildLoggerFactory.call(null as never, counted, { reqId }, {}, null as never)
  return { lines, make, children: () => children }
}

t.test('nothing is made for lines below the level; lines at the level carry the bindings', async (t) => {
  const { lines, make, children } = logger('warn')
  const log = make('r-1')
  log.debug('quiet')
  log.info({ a: 1 }, 'quiet too')
  t.equal(children(), 0, 'no child made')
  t.equal(log.level, 'warn', 'the level is the parent\'s')
  log.warn({ b: 2 }, 'heard')
  log.error(new Error('boom'))
  log.info('still quiet')
  await new Promise((ok) => setImmediate(ok))
  t.equal(children(), 1, 'one child, made on the first line written')
  t.equal(lines.length, 2)
  t.match(lines[0], { reqId: 'r-1', b: 2, msg: 'heard', level: 40 })
  t.match(lines[1], { reqId: 'r-1', level: 50, err: { message: 'boom' } })
})

t.test('children of the request logger and a level set on it behave as on a pino child', async (t) => {
  const { lines, make } = logger('info')
  const log = make('r-2')
  log.child({ stream: 's1' }).info('from a grandchild')
  const other = make('r-3')
  other.level = 'debug'
  other.debug('now heard')
  await new Promise((ok) => setImmediate(ok))
  t.match(lines[0], { reqId: 'r-2', stream: 's1', msg: 'from a grandchild' })
  t.match(lines[1], { reqId: 'r-3', msg: 'now heard', level: 20 })
})
