import t from 'tap'
import { CallAbort, CancelledByClient, ServerStopping, SessionEnded } from '../../src/rpc/call-abort.js'
import { CallTable } from '../../src/rpc/calls.js'

t.test('the signal is made on first use and replays an earlier abort with its reason', async (t) => {
  const abort = new CallAbort()
  abort.abort(new CancelledByClient('user pressed stop'))
  t.ok(abort.aborted)
  t.ok(abort.signal.aborted, 'a signal made after the abort is already aborted')
  t.ok(abort.signal.reason instanceof CancelledByClient)
  abort.abort(new SessionEnded('later')) // only the first reason counts
  t.ok(abort.signal.reason instanceof CancelledByClient)
})

t.test('a session that ends aborts its calls with SessionEnded, so tools can tell it from a client cancel', async (t) => {
  const calls = new CallTable()
  const call = new CallAbort()
  const signal = call.signal
  t.ok(calls.begin('sess-1', 1, call))
  calls.endSession('sess-1', 'session closed')
  t.ok(signal.aborted)
  t.ok(signal.reason instanceof SessionEnded)
  t.equal((signal.reason as Error).message, 'session closed')
})

t.test('the shutdown stops calls of both eras with ServerStopping, then closes what sessions still hold', async (t) => {
  const calls = new CallTable()
  const inSession = new CallAbort()
  const stateless = new CallAbort()
  t.ok(calls.begin('sess-1', 1, inSession))
  t.ok(calls.begin(null, 1, stateless), 'stateless calls have no address: the same id is no conflict')
  t.ok(calls.begin(null, 1, new CallAbort()))
  await calls.stopAll()
  t.ok(inSession.signal.reason instanceof ServerStopping)
  t.ok(stateless.signal.reason instanceof ServerStopping)
  t.ok(calls.stoppedByShutdown(inSession), 'a session call still running when the shutdown closed it')
  t.notOk(calls.stoppedByShutdown(stateless), 'a stateless call is never recorded as stopped by the shutdown')
  t.notOk(calls.holds('sess-1'))
})

t.test('a session call that ends within the turns it is given is not recorded as stopped by the shutdown', async (t) => {
  const calls = new CallTable()
  const call = new CallAbort()
  t.ok(calls.begin('sess-1', 7, call))
  call.signal.addEventListener('abort', () => setImmediate(() => calls.end('sess-1', 7, call)))
  await calls.stopAll()
  t.ok(call.signal.reason instanceof ServerStopping)
  t.notOk(calls.stoppedByShutdown(call))
})
