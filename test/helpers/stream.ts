import { request as undiciRequest } from 'undici'
import { parseSse, type SseEvent } from './mcp.js'

/** An HTTP response whose body is read incrementally, so a test can watch an SSE stream while it is open. */
export interface LiveStream {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** Everything received so far. */
  text(): string
  /** Events and comments received so far. */
  parsed(): { events: SseEvent[]; comments: string[] }
  /** Resolves with the received text once `predicate` holds; rejects on timeout or when the body ends first. */
  waitFor(predicate: (text: string) => boolean, timeoutMs: number, what: string): Promise<string>
  /** Resolves with the whole text when the server ends the body; rejects after `timeoutMs`. */
  ended(timeoutMs: number): Promise<string>
  /** True once the server ended the body (not when the test destroyed it). */
  readonly endedByServer: boolean
  /** Stops reading and destroys the body (idempotent). */
  close(): void
}

export async function openLive(
  url: string,
  options: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string },
): Promise<LiveStream> {
  const res = await undiciRequest(url, { method: options.method, headers: options.headers, ...(options.body !== undefined ? { body: options.body } : {}) })
  let buffer = ''
  let finished = false
  let byServer = false
  let closedByUs = false
  const listeners = new Set<() => void>()
  const wake = () => {
    for (const l of [...listeners]) l()
  }
  res.body.setEncoding('utf8')
  void (async () => {
    try {
      for await (const chunk of res.body) {
        buffer += chunk as string
        wake()
      }
      byServer = !closedByUs
    } catch {
      byServer = false
    } finally {
      finished = true
      wake()
    }
  })()

  function waitUntil(check: () => boolean, timeoutMs: number, onEnd: () => Error | null, what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(listener)
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; received so far: ${JSON.stringify(buffer)}`))
      }, timeoutMs)
      const listener = () => {
        if (check()) {
          clearTimeout(timer)
          listeners.delete(listener)
          resolve(buffer)
          return
        }
        if (finished) {
          const err = onEnd()
          if (err) {
            clearTimeout(timer)
            listeners.delete(listener)
            reject(err)
          }
        }
      }
      listeners.add(listener)
      listener()
    })
  }

  return {
    status: res.statusCode,
    headers: res.headers as LiveStream['headers'],
    text: () => buffer,
    parsed: () => parseSse(buffer),
    waitFor: (predicate, timeoutMs, what) =>
      waitUntil(() => predicate(buffer), timeoutMs, () => new Error(`the body ended before ${what}; received: ${JSON.stringify(buffer)}`), what),
    ended: (timeoutMs) => waitUntil(() => finished, timeoutMs, () => null, 'the end of the body'),
    get endedByServer() {
      return byServer
    },
    close() {
      if (finished || closedByUs) return
      closedByUs = true
      res.body.destroy()
    },
  }
}

export function countOccurrences(text: string, needle: string): number {
  let n = 0
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + needle.length)) n++
  return n
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The complete JSON-RPC messages received so far on a live SSE stream (a half-received event is left for later;
 * priming events carry no data). */
export function messagesOf(live: LiveStream): any[] {
  const text = live.text()
  const complete = text.slice(0, text.lastIndexOf('\n\n') + 2)
  return parseSse(complete).events.filter((e) => e.data !== '').map((e) => JSON.parse(e.data))
}

/** Polls `probe` every 15 ms until it returns (or resolves to) a value; rejects after `ms`. */
export async function until<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(15)
  }
}
