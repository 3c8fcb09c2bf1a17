/**
 * The time of the server: what "now" is, and timers. Everything that decides by time (expiry of codes, tokens, keys and
 * pending authorizations, sweeps, grace periods) asks the clock it was given, so that a test can hand the server a
 * manual clock and move time itself instead of waiting for it (docs/decisions/clock.md). The default is the system's.
 */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number
  /**
   * A callback may return a promise of the work it started: the system clock ignores it (the callback reports its own
   * failures), a test's manual clock waits for it before time moves on, so the work's outcome is there to check.
   */
  setTimeout(fn: TimerCallback, ms: number): ClockTimer
  setInterval(fn: TimerCallback, ms: number): ClockTimer
  /** Cancels a timer of either kind; undefined is ignored, as the globals do. */
  clearTimer(timer: ClockTimer | undefined): void
}

export type TimerCallback = () => void | Promise<void>

/** A timer the clock gave out. `unref` lets the process exit while it is pending (a no-op on a manual clock). */
export interface ClockTimer {
  unref(): ClockTimer
}

/** The system clock: Date.now() and Node's own timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(() => void fn(), ms),
  setInterval: (fn, ms) => setInterval(() => void fn(), ms),
  clearTimer: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
}
