import t from 'tap'
import { CallAbort, CancelledByClient, SessionEnded } from '../../src/rpc/call-abort.js'
import { SessionRuntime } from '../../src/sessions/session.js'

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
  const runtime = new SessionRuntime()
  const call = new CallAbort()
  const signal = call.signal
  runtime.inflight.set(1, call)
  runtime.close('session closed')
  t.ok(signal.aborted)
  t.ok(signal.reason instanceof SessionEnded)
  t.equal((signal.reason as Error).message, 'session closed')
})
