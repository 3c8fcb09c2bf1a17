/**
 * Cancellation state of one request. The AbortController (about 3 µs with its signal) is made only when a handler
 * reads `signal`, which most quick calls never do; an abort before that is remembered and applied on creation.
 */
export class CallAbort {
  #controller: AbortController | null = null
  #reason: unknown = undefined
  #aborted = false

  get aborted(): boolean {
    return this.#aborted
  }

  get signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController()
      if (this.#aborted) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  abort(reason?: unknown): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    this.#controller?.abort(reason)
  }
}

/** The abort reason when the client sent notifications/cancelled for the call. */
export class CancelledByClient extends Error {
  override name = 'CancelledByClient'
}

/** The abort reason when the call's session ended under it (DELETE, expiry, revoked credential, shutdown). */
export class SessionEnded extends Error {
  override name = 'SessionEnded'
}

/**
 * The abort reason when the client closed the connection of a stateless (2026-07-28) request: on Streamable HTTP that
 * is how a client cancels. Nothing more is sent for the request; long operations decide what "stop" means (a
 * deployment keeps running, as it does when a session's client goes away: its outcome stays readable).
 */
export class ClientDisconnected extends Error {
  override name = 'ClientDisconnected'
}

/**
 * The abort reason when the server stops while the call is still running (after the shutdown's drain phase: the work
 * that can end on its own, deployments, has ended and answered by then). The transport answers such a call at once with
 * SERVICE_UNAVAILABLE, before its stream ends; whatever the handler produces afterwards is not sent.
 */
export class ServerStopping extends Error {
  override name = 'ServerStopping'
}

/** The abort reason when the client cancelled a task with tasks/cancel (tasks extension): a client cancellation too. */
export class TaskCancelled extends CancelledByClient {
  override name = 'TaskCancelled'
}
