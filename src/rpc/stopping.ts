import { ServiceError } from '../errors/service-error.js'
import { CallAbort, ServerStopping } from './call-abort.js'

/**
 * Calls still running when the server stops. The shutdown's drain phase lets the work that can end end and answer (a
 * deployment answers "interrupted"); whatever still runs in the finish phase (a call waiting for a confirmation, an
 * embedder's tool that ignores its signal) is stopped with ServerStopping, and its front-end answers it at once, on the
 * stream that is about to end: a client never waits on a request the server has dropped.
 */

/**
 * The answer of a call the shutdown stopped (a JSON-RPC error: the call produced no result of its own). `what` is the
 * call as its method describes it (Dispatcher.describe: `tools/call <tool>`).
 */
export function stoppedByShutdown(what: string): ServiceError {
  return new ServiceError('SERVICE_UNAVAILABLE', {
    message: `The server is shutting down and stopped this ${what} before it finished; call again once it is back`,
  })
}

/** A call's cancellation that runs `onStop` (which answers the call) when the reason is ServerStopping. */
export class StoppableCall extends CallAbort {
  readonly #onStop: () => void

  constructor(onStop: () => void) {
    super()
    this.#onStop = onStop
  }

  override abort(reason?: unknown): void {
    if (this.aborted) return
    // Aborted first: what the handler withdraws on abort (a question to the client) goes out before the answer.
    super.abort(reason)
    if (reason instanceof ServerStopping) this.#onStop()
  }
}
