/**
 * How a retention purge runs its batches (docs/decisions/retention.md): each batch is one short statement or
 * transaction, and between two batches the purge yields (`pause`), so the requests that arrived meanwhile run first.
 */
export interface Batches {
  /** Rows per batch (SERVICE_RETENTION_BATCH). */
  size: number
  /** Awaited between two batches: by default one turn of the event loop. */
  pause(): Promise<void>
}

/** One turn of the event loop: what was queued meanwhile (requests, their database calls) runs before the next batch. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
