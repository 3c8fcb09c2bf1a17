import type { Clock, ClockTimer, TimerCallback } from '../../src/lib/clock.js'

interface Pending {
  id: number
  at: number
  fn: TimerCallback
  /** Set for an interval: it is due again this long after it fired. */
  every?: number
}

/**
 * A clock that moves only when the test says so. It starts at the wall clock's now (rows written with Date.now() by
 * code that takes no clock stay in order with it) and never goes back. `advance(ms)` fires the timers that fall due, in
 * the order of their times (then of their creation), awaiting the promise a callback returns (and a few turns of the
 * event loop) before the next one.
 */
export class ManualClock implements Clock {
  #now: number
  #next = 1
  readonly #pending = new Map<number, Pending>()

  constructor(start = Date.now()) {
    this.#now = start
  }

  now(): number {
    return this.#now
  }

  setTimeout(fn: TimerCallback, ms: number): ClockTimer {
    return this.#add({ at: this.#now + Math.max(0, ms), fn })
  }

  setInterval(fn: TimerCallback, ms: number): ClockTimer {
    const every = Math.max(1, ms)
    return this.#add({ at: this.#now + every, fn, every })
  }

  clearTimer(timer: ClockTimer | undefined): void {
    if (timer instanceof ManualTimer) this.#pending.delete(timer.id)
  }

  /** Timers not yet fired (intervals count once). */
  get pendingTimers(): number {
    return this.#pending.size
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, each at its own time. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new Error(`a manual clock only moves forward, not by ${ms} ms`)
    const end = this.#now + ms
    for (;;) {
      const due = [...this.#pending.values()].filter((p) => p.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0]
      if (!due) break
      this.#now = due.at
      if (due.every === undefined) this.#pending.delete(due.id)
      else due.at += due.every
      // The work the timer started (a sweep, a flush) ends before time moves on.
      await due.fn()
      await settle()
    }
    this.#now = end
    await settle()
  }

  #add(p: Omit<Pending, 'id'>): ManualTimer {
    const id = this.#next++
    this.#pending.set(id, { id, ...p })
    return new ManualTimer(id)
  }
}

class ManualTimer implements ClockTimer {
  constructor(readonly id: number) {}
  unref(): ClockTimer {
    return this
  }
}

/**
 * Lets the work a timer started run as far as it can without more time passing: a few turns of the event loop, so that
 * promise chains and database calls (SQLite answers on the same loop; PostgreSQL over a socket) complete.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}
