/**
 * Server events that clients may follow: on a `subscriptions/listen` stream (2026-07-28), or on a session's GET stream
 * (resource updates and list changes of the 2025 revisions). In memory: one process serves
 * everything today; a shared bus (Redis) can replace it for several processes without changing its users.
 */
export type ServerEvent =
  /** A task of this member changed status. */
  | { type: 'task'; taskId: string; membershipId: string }
  /** The contents of a resource changed; `organizationId` null: a resource every organization sees. */
  | { type: 'resource.updated'; uri: string; organizationId: string | null }
  /**
   * What a list method returns changed for an organization's members (null: for everyone): a tool, prompt or resource
   * registered or removed at run time, an app created or deleted (its resource).
   */
  | { type: 'list.changed'; list: 'tools' | 'prompts' | 'resources'; organizationId: string | null }

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
