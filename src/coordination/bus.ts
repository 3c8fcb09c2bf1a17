import type { Redis } from 'ioredis'

export type BusHandler = (message: unknown) => void

/**
 * Messages between the processes serving one database, by channel. With Redis (several processes) they go through
 * its publish/subscribe on a connection of their own; a process alone delivers them to itself. Delivery is at most
 * once: whoever must not miss a message also acts when the subscription is re-established (`onResubscribed`), as a
 * message published while it was down is lost.
 */
export interface Bus {
  /** Delivers `message` (JSON) to the channel's handlers in every process, this one included. */
  publish(channel: string, message: unknown): Promise<void>
  /** Calls `handler` for each message on `channel` until the returned function is called. */
  subscribe(channel: string, handler: BusHandler): Promise<() => void>
  /** Whether messages published now reach this process (false while the subscription connection is down). */
  readonly listening: boolean
  /** Calls `fn` each time the subscription comes back after it was lost (not the first time). */
  onResubscribed(fn: () => void): void
  /** Called when the subscription is lost. */
  onLost(fn: () => void): void
  close(): Promise<void>
}

/** The handlers of each channel, and delivery to them: a handler's failure is its own (it logs), the others still run. */
export class Channels {
  readonly handlers = new Map<string, Set<BusHandler>>()

  add(channel: string, handler: BusHandler): boolean {
    let set = this.handlers.get(channel)
    const first = set === undefined
    if (!set) this.handlers.set(channel, (set = new Set()))
    set.add(handler)
    return first
  }

  /** True when the channel has no handler left. */
  remove(channel: string, handler: BusHandler): boolean {
    const set = this.handlers.get(channel)
    if (!set) return false
    set.delete(handler)
    if (set.size > 0) return false
    this.handlers.delete(channel)
    return true
  }

  deliver(channel: string, message: unknown): void {
    const set = this.handlers.get(channel)
    if (!set) return
    for (const handler of [...set]) {
      try {
        handler(message)
      } catch {
        // see above
      }
    }
  }
}

/** One process: messages go straight to this process's handlers, on the next turn (as they would through Redis). */
export function localBus(): Bus {
  const channels = new Channels()
  return {
    listening: true,
    async publish(channel, message) {
      const copy: unknown = JSON.parse(JSON.stringify(message))
      queueMicrotask(() => channels.deliver(channel, copy))
    },
    async subscribe(channel, handler) {
      channels.add(channel, handler)
      return () => void channels.remove(channel, handler)
    },
    onResubscribed() {},
    onLost() {},
    async close() {},
  }
}

/**
 * Redis publish/subscribe. `subscriber` is a connection of its own (a subscribed connection takes no other command);
 * `publisher` is the shared command connection. Channel names get `prefix`, like every key the server uses.
 */
export function redisBus(publisher: Redis, subscriber: Redis, prefix: string): Bus {
  const channels = new Channels()
  const lost = new Set<() => void>()
  const resubscribed = new Set<() => void>()
  let listening = subscriber.status === 'ready'
  let wasLost = false
  subscriber.on('message', (channel: string, text: string) => {
    if (!channel.startsWith(prefix)) return
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      return // not ours: every message this bus publishes is JSON
    }
    channels.deliver(channel.slice(prefix.length), message)
  })
  subscriber.on('close', () => {
    if (!listening) return
    listening = false
    wasLost = true
    for (const fn of lost) fn()
  })
  // ioredis subscribes again to every channel on its own when it reconnects (autoResubscribe), then reports ready.
  subscriber.on('ready', () => {
    listening = true
    if (!wasLost) return
    wasLost = false
    for (const fn of resubscribed) fn()
  })
  return {
    get listening() {
      return listening
    },
    async publish(channel, message) {
      await publisher.publish(prefix + channel, JSON.stringify(message))
    },
    async subscribe(channel, handler) {
      if (channels.add(channel, handler)) await subscriber.subscribe(prefix + channel)
      return () => {
        if (channels.remove(channel, handler)) void subscriber.unsubscribe(prefix + channel).catch(() => {})
      }
    },
    onResubscribed(fn) {
      resubscribed.add(fn)
    },
    onLost(fn) {
      lost.add(fn)
    },
    async close() {
      channels.handlers.clear()
    },
  }
}
