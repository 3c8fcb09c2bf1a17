import { Agent, get } from 'node:http'
import type { Test } from 'tap'

/**
 * For the hardening tests, written as attacks: while `attack` runs, an unrelated client keeps asking the server a
 * cheap question on its own connection, and every answer must come within `maxMs`. The bound is a liveness bound
 * (what an attack that stalls the event loop or exhausts connections breaks, by seconds), not a speed measurement:
 * the benchmarks measure speed.
 */
export interface Served {
  probes: number
  maxMs: number
  failures: string[]
}

export const UNRELATED_CLIENT_MAX_MS = 2000

/** One GET on `agent`, optionally from `localAddress`: its status, or a failure. */
function probeOnce(url: string, agent: Agent, localAddress: string | undefined, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent, ...(localAddress ? { localAddress } : {}), timeout: timeoutMs }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    req.on('error', reject)
  })
}

export async function whileServed<T>(
  t: Test,
  baseUrl: string,
  attack: () => Promise<T>,
  options: { path?: string; maxMs?: number; label?: string; localAddress?: string } = {},
): Promise<T> {
  const path = options.path ?? '/.well-known/oauth-protected-resource'
  const maxMs = options.maxMs ?? UNRELATED_CLIENT_MAX_MS
  // `localAddress` (e.g. 127.0.0.2, also loopback on Linux): an unrelated client at another address than the attacker.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const served: Served = { probes: 0, maxMs: 0, failures: [] }
  let running = true
  const probe = (async () => {
    while (running) {
      const started = Date.now()
      try {
        const status = await probeOnce(`${baseUrl}${path}`, agent, options.localAddress, maxMs * 5)
        if (status !== 200) served.failures.push(`HTTP ${status}`)
      } catch (err) {
        served.failures.push((err as Error).message)
      }
      served.probes++
      served.maxMs = Math.max(served.maxMs, Date.now() - started)
      await new Promise((r) => setTimeout(r, 10))
    }
  })()
  let result: T
  try {
    result = await attack()
  } finally {
    running = false
    await probe
    agent.destroy()
  }
  const label = options.label ?? 'the attack'
  t.ok(served.probes > 0, `an unrelated client asked during ${label} (${served.probes} requests)`)
  t.strictSame(served.failures, [], `every request of the unrelated client was answered 200 during ${label}`)
  t.ok(served.maxMs < maxMs, `the unrelated client waited at most ${served.maxMs} ms during ${label} (bound ${maxMs} ms)`)
  return result
}
