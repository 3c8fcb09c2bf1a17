/**
 * Server events that clients may follow on a `subscriptions/listen` stream (2026-07-28). In memory: one process serves
 * everything today; a shared bus (Redis) can replace it for several processes without changing its users.
 */
export type ServerEvent =
  /** A task of this member changed status. */
  | { type: 'task'; taskId: string; membershipId: string }

export class EventBus {
  readonly #listeners = new Set<(event: ServerEvent) => void>()

  /** Calls `listener` for every event until the returned function is called. */
  subscribe(listener: (event: ServerEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  emit(event: ServerEvent): void {
    for (const l of [...this.#listeners]) {
      try {
        l(event)
      } catch {
        // A listener's failure is its own (it logs); the others still hear the event.
      }
    }
  }
}
