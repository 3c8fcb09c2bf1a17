import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Bus } from './bus.js'

type Question = { kind: string; ref: string; replyTo: string; payload: unknown }
type Reply = { kind: '.reply'; ref: string; answer: unknown }

const inboxOf = (processId: string) => `process:${processId}`

/**
 * Questions from one process to another over the bus, answered by whoever holds what they are about: the process that
 * awaits a client's answer (sessions/session-relay.ts), the process that runs a deployment. Each process reads its own
 * channel; a question names its kind, and a handler registered for that kind answers it. A process that does not
 * answer in time is gone (or cut off), and `ask` says so with `undefined`.
 */
export class ProcessInbox {
  readonly #handlers = new Map<string, (payload: unknown) => unknown>()
  readonly #waiting = new Map<string, (answer: unknown) => void>()
  #unsubscribe: (() => void) | null = null

  constructor(private readonly bus: Bus, readonly processId: string, private readonly log: FastifyBaseLogger) {}

  async start(): Promise<void> {
    this.#unsubscribe = await this.bus.subscribe(inboxOf(this.processId), (message) => void this.#receive(message as Question | Reply))
  }

  stop(): void {
    this.#unsubscribe?.()
    this.#unsubscribe = null
  }

  /** Answers the questions of `kind` with what `handler` returns (JSON). */
  handle<P, A>(kind: string, handler: (payload: P) => A | Promise<A>): void {
    this.#handlers.set(kind, handler as (payload: unknown) => unknown)
  }

  /** Asks `processId`; resolves with its answer, or undefined when none came within `timeoutMs`. */
  ask<A>(processId: string, kind: string, payload: unknown, timeoutMs: number): Promise<A | undefined> {
    const ref = randomUUID()
    return new Promise<A | undefined>((resolve) => {
      const done = (answer: unknown) => {
        clearTimeout(timer)
        this.#waiting.delete(ref)
        resolve(answer as A | undefined)
      }
      const timer = setTimeout(() => done(undefined), timeoutMs)
      this.#waiting.set(ref, done)
      const question: Question = { kind, ref, replyTo: this.processId, payload }
      this.bus.publish(inboxOf(processId), question).catch(() => done(undefined))
    })
  }

  async #receive(received: Question | Reply): Promise<void> {
    if (received.kind === '.reply') {
      this.#waiting.get(received.ref)?.((received as Reply).answer)
      return
    }
    const message = received as Question
    const handler = this.#handlers.get(message.kind)
    if (!handler) return
    let answer: unknown
    try {
      answer = await handler(message.payload)
    } catch (err) {
      this.log.error({ err, kind: message.kind }, 'could not answer a question from another process')
      return
    }
    const reply: Reply = { kind: '.reply', ref: message.ref, answer: answer ?? null }
    await this.bus.publish(inboxOf(message.replyTo), reply).catch((err: unknown) => this.log.warn({ err, kind: message.kind }, 'could not reply to another process'))
  }
}
