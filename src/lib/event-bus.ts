/**
 * Server events that clients may follow: on a `subscriptions/listen` stream (2026-07-28), or on a session's GET stream
 * (resource updates and list changes of the 2025 revisions). In memory for one process; relayed through Redis when
 * several share a database (`relayThrough`), without changing its users.
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
  /** A browser page answered a value a tool call waits for (browser_inputs row `id`): the call re-reads the row. */
  | { type: 'browser-input'; id: string }

/** Where events cross processes: the coordination bus (coordination/bus.ts), when several processes share a database. */
export interface EventRelay {
  publish(channel: string, message: unknown): Promise<void>
  subscribe(channel: string, handler: (message: unknown) => void): Promise<() => void>
}

const CHANNEL = 'events'

export class EventBus {
  readonly #listeners = new Set<(event: ServerEvent) => void>()
  #relay: EventRelay | null = null

  /**
   * Events then go through `relay` to the listeners of every process (this one included): a task that ends on one
   * process, or a resource a call changed there, reaches the streams another process serves.
   */
  async relayThrough(relay: EventRelay): Promise<() => void> {
    this.#relay = relay
    return relay.subscribe(CHANNEL, (event) => this.#deliver(event as ServerEvent))
  }

  /** Calls `listener` for every event until the returned function is called. */
  subscribe(listener: (event: ServerEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  emit(event: ServerEvent): void {
    if (this.#relay === null) return this.#deliver(event)
    // Relayed: delivered here when it comes back from the relay. Should the relay fail, this process at least hears it.
    this.#relay.publish(CHANNEL, event).catch(() => this.#deliver(event))
  }

  #deliver(event: ServerEvent): void {
    for (const l of [...this.#listeners]) {
      try {
        l(event)
      } catch {
        // A listener's failure is its own (it logs); the others still hear the event.
      }
    }
  }
}
