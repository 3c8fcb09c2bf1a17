/**
 * The order of a clean stop. Fastify runs preClose hooks in registration order, which is dependency order: the
 * sessions (registered early) would end their streams before the tools (registered later) had interrupted their runs
 * and answered the calls waiting on them. Stopping needs the opposite, in two phases:
 *
 * 1. drain: stop the work in flight so that every call still open gets its final answer (pipelines are interrupted,
 *    deployment calls answer "was interrupted", tasks record how they ended); its steps run together;
 * 2. finish: end what stays open. Calls still running (one waiting for a confirmation, an embedder's tool) are stopped
 *    with ServerStopping and answered SERVICE_UNAVAILABLE by their transport (mcp-transport/stopping.ts) before their
 *    streams end; subscriptions get their listen result; sessions end their streams.
 *
 * Each feature registers its own step in the phase it belongs to; the http plugin's one preClose hook runs them, after
 * which Fastify closes the connections and runs the onClose hooks (the database closes last).
 */
export class Shutdown {
  readonly #drain: Array<() => Promise<void> | void> = []
  readonly #finish: Array<() => Promise<void> | void> = []

  /** A step of phase 1: stop work in flight and let its answers go out. */
  onDrain(step: () => Promise<void> | void): void {
    this.#drain.push(step)
  }

  /** A step of phase 2: end what stays open, once every call has answered. */
  onFinish(step: () => Promise<void> | void): void {
    this.#finish.push(step)
  }

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
  }
}
