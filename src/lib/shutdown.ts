import type { Server, ServerResponse } from 'node:http'
import { Server as NetServer, type Socket } from 'node:net'
import { systemClock, type Clock } from './clock.js'

/**
 * The order of a clean stop. Fastify runs preClose hooks in registration order, which is dependency order: the
 * sessions (registered early) would end their streams before the tools (registered later) had interrupted their runs
 * and answered the calls waiting on them. Stopping needs the opposite, in phases:
 *
 * 0. stop taking work (`beginStop`): the listener closes, so a proxy in front gets "connection refused" for this
 *    process, which every proxy retries on another one whatever the method (nothing was sent) and counts against this
 *    one; requests arriving on connections used before are refused with 503 by the http plugin (nothing runs), but the
 *    first request of a connection accepted just before the stop is served (`admits`); the `onStop` steps run (a
 *    session's GET stream ends, so its client reconnects through the proxy to another process);
 * 1. settle (`settle`): requests in flight end normally, the answers to them included (a short tools/call, a call whose
 *    confirmation is being answered, possibly on another process), and a proxy's idle keep-alive connections are
 *    used (answered 503, then closed) or closed by the proxy, for at most SERVICE_STOP_SETTLE_MS. Work that would not
 *    end in any such time (a deployment, a GET or listen stream) is parked and not waited for. Closing an idle
 *    connection the proxy is just reusing would cut a request nobody can tell was received: a POST would surface as a
 *    502, which no proxy may retry. Waiting until the proxy has let go of them avoids that;
 * 2. drain: stop the work in flight so that every call still open gets its final answer (pipelines are interrupted,
 *    deployment calls answer "interrupted", tasks record how they ended); its steps run together;
 * 3. finish: end what stays open: subscriptions get their listen result, event subscriptions stop;
 * 4. end: calls still running, of either era (one waiting for a confirmation, an embedder's tool), are stopped by the
 *    dispatcher with ServerStopping and answered SERVICE_UNAVAILABLE by the intake that ran them (rpc/stopping.ts, rpc/intake.ts)
 *    before their streams end (rpc/calls.ts); then sessions end, with their streams. A phase of its own, after every
 *    finish step, because stopping a call is the last resort: what a feature ends cleanly in finish is not stopped.
 *
 * Each feature registers its own step in the phase it belongs to; the http plugin's one preClose hook runs them, after
 * which Fastify closes the connections and runs the onClose hooks (the database closes last).
 */
export class Shutdown {
  readonly #stop: Array<() => void> = []
  readonly #drain: Array<() => Promise<void> | void> = []
  readonly #finish: Array<() => Promise<void> | void> = []
  readonly #end: Array<() => Promise<void> | void> = []
  /** Open connections of the server (watch), to know which are idle and which carry a request still in progress. */
  readonly #sockets = new Set<Socket>()
  /** Responses the settle phase does not wait for: streams and calls that end only when stopped. */
  readonly #parked = new WeakSet<ServerResponse>()
  /** Calls in flight whose HTTP exchange may be gone (a session's call goes on when its client disconnects). */
  #holds = 0
  /** Set while the settle phase waits: re-checks whether everything it waits for has ended. */
  #recheck: (() => void) | null = null
  /**
   * Connections accepted before the stop that had not sent a request yet: the proxy chose this process before it could
   * know of the stop, so their first request is served during the settle phase (see `admits`).
   */
  readonly #unused = new WeakSet<Socket>()
  #settling = false
  /** Bounds the settle phase (a manual one in tests of the grace period). */
  readonly #clock: Clock

  constructor(clock: Clock = systemClock) {
    this.#clock = clock
  }

  /** A step of phase 0: stop taking work here, at once (synchronous: nothing may be in between). */
  onStop(step: () => void): void {
    this.#stop.push(step)
  }

  /** A step of phase 2: stop work in flight and let its answers go out. */
  onDrain(step: () => Promise<void> | void): void {
    this.#drain.push(step)
  }

  /** A step of phase 3: end what stays open, once every call has answered. */
  onFinish(step: () => Promise<void> | void): void {
    this.#finish.push(step)
  }

  /** A step of phase 4: stop the calls still running, then end sessions (registration order: the dispatcher first). */
  onEnd(step: () => Promise<void> | void): void {
    this.#end.push(step)
  }

  /** Follows the connections of `server`; one Set entry per connection, nothing per request. */
  watch(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket)
      socket.once('close', () => {
        this.#sockets.delete(socket)
        this.#recheck?.()
      })
    })
  }

  /** The stop does not wait for this response (a stream that ends only when the server stops it, or a long run). */
  park(response: ServerResponse): void {
    this.#parked.add(response)
    this.#recheck?.()
  }

  /**
   * A call in flight the stop waits for, even if its HTTP exchange ends first (a session's client that disconnects does
   * not cancel its call). Returns its release, which may be called more than once.
   */
  hold(): () => void {
    this.#holds++
    let held = true
    return () => {
      if (!held) return
      held = false
      this.#holds--
      this.#recheck?.()
    }
  }

  /**
   * Phase 0. The listener closes (the connections stay: net.Server's close, since http.Server's would also drop the idle
   * ones, under a proxy that may be reusing one); every answer not yet started closes its connection after it, so that
   * no connection goes back to a proxy's pool of idle ones; then the features' stop steps.
   */
  beginStop(server: Server, log: (err: unknown, phase: string) => void): void {
    if (server.listening) NetServer.prototype.close.call(server)
    this.#settling = true
    for (const socket of this.#sockets) {
      const response = currentResponse(socket)
      if (response && !response.headersSent) response.setHeader('connection', 'close')
      if (response === null && socket.bytesRead === 0) this.#unused.add(socket)
    }
    for (const step of this.#stop) {
      try {
        step()
      } catch (err) {
        log(err, 'stop')
      }
    }
  }

  /**
   * Whether a request that arrives while the server stops is served rather than refused with 503: only the first
   * request of a connection accepted before the stop, and only during the settle phase. A proxy had chosen this process
   * for it a moment before the stop began (the request was on its way), and Caddy, unlike nginx, cannot send a 503 to
   * another process. A request on a connection used before (a proxy's kept connection) is refused: the proxy learns of
   * the stop, and sends it elsewhere.
   */
  admits(socket: Socket): boolean {
    if (!this.#settling || !this.#unused.has(socket)) return false
    this.#unused.delete(socket)
    return true
  }

  /** True when nothing the settle phase waits for is left: no held call, no idle connection, no request in progress. */
  settled(): boolean {
    if (this.#holds > 0) return false
    for (const socket of this.#sockets) {
      const response = currentResponse(socket)
      if (response === null || !this.#parked.has(response)) return false
    }
    return true
  }

  /**
   * Phase 1: resolves once settled, or after `ms`. Decided by the events of what it waits for (a connection closing, a
   * response ending, a call released, a response parked); the time is only the bound.
   */
  settle(ms: number): Promise<void> {
    if (ms <= 0 || this.settled()) {
      this.#settling = false
      return Promise.resolve()
    }
    return new Promise<void>((resolve) => {
      const done = () => {
        this.#clock.clearTimer(timer)
        this.#recheck = null
        this.#settling = false
        resolve()
      }
      const timer = this.#clock.setTimeout(done, ms)
      const responses = new WeakSet<ServerResponse>()
      this.#recheck = () => {
        if (this.settled()) return done()
        // A response that started since (a refusal) ends its connection; one that ends on a kept connection leaves it idle.
        for (const socket of this.#sockets) {
          const response = currentResponse(socket)
          if (response && !responses.has(response)) {
            responses.add(response)
            response.once('close', () => this.#recheck?.())
          }
        }
      }
      this.#recheck()
    })
  }

  /** Phases 2, 3 and 4. */
  async run(log: (err: unknown, phase: string) => void): Promise<void> {
    await Promise.all(this.#drain.map(async (step) => {
      try {
        await step()
      } catch (err) {
        log(err, 'drain')
      }
    }))
    // The answers of calls that ended in the drain are written by their front-ends a few ticks later.
    await new Promise((resolve) => setImmediate(resolve))
    for (const step of this.#finish) {
      try {
        await step()
      } catch (err) {
        log(err, 'finish')
      }
    }
    for (const step of this.#end) {
      try {
        await step()
      } catch (err) {
        log(err, 'end')
      }
    }
  }
}

/** The response a connection is answering now (Node's own bookkeeping), or null when it is idle between requests. */
function currentResponse(socket: Socket): ServerResponse | null {
  return (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? null
}
