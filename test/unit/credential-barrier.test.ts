import t from 'tap'
import type { Bus, BusHandler } from '../../src/coordination/bus.js'
import { credentialBarrier } from '../../src/coordination/credential-barrier.js'

/**
 * The revocation barrier among processes, each with its own bus on one hub (what Redis's publish/subscribe is to
 * them): a change returns once every live process dropped its cache, a process that does not answer is waited for one
 * lease at most, and a process that does not hear the hub trusts no cached credential.
 */

class Hub {
  readonly members = new Set<HubBus>()
  bus(): HubBus {
    const bus = new HubBus(this)
    this.members.add(bus)
    return bus
  }
}

class HubBus implements Bus {
  readonly handlers = new Map<string, Set<BusHandler>>()
  /** Cut off: publishes go nowhere and nothing arrives. */
  cut = false
  constructor(readonly hub: Hub) {}
  get listening() {
    return !this.cut
  }
  async publish(channel: string, message: unknown) {
    if (this.cut) return
    for (const member of this.hub.members) {
      if (member.cut) continue
      for (const h of member.handlers.get(channel) ?? []) queueMicrotask(() => h(JSON.parse(JSON.stringify(message))))
    }
  }
  async subscribe(channel: string, handler: BusHandler) {
    let set = this.handlers.get(channel)
    if (!set) this.handlers.set(channel, (set = new Set()))
    set.add(handler)
    return () => void set.delete(handler)
  }
  onResubscribed() {}
  onLost() {}
  async close() {}
}

const quiet = () => {}
const settle = () => new Promise((resolve) => setTimeout(resolve, 5))

async function processes(leaseMs: number, ids: string[]) {
  const hub = new Hub()
  const live = new Set(ids)
  const warnings: unknown[] = []
  const made = ids.map((id) => {
    const bus = hub.bus()
    const barrier = credentialBarrier({ bus, processId: id, leaseMs, liveIds: async () => [...live], warn: (_m, d) => void warnings.push(d) })
    return { id, bus, barrier }
  })
  for (const p of made) await p.barrier.start({ serving: true })
  await settle() // the first heartbeats are heard
  // Hearing the hub the first time counts as a change (nothing before it can be trusted): the caches start empty.
  for (const p of made) p.barrier.takeChanged()
  return { hub, live, warnings, made, stopAll: () => made.forEach((p) => p.barrier.stop()) }
}

t.test('a change returns once every live process has dropped its cache', async (t) => {
  const { made: [a, b, c], stopAll, warnings } = await processes(60_000, ['a', 'b', 'c'])
  t.teardown(stopAll)
  for (const p of [a!, b!, c!]) t.equal(p.barrier.takeChanged(), false, `${p.id} trusts its cache`)
  await a!.barrier.bump()
  for (const p of [a!, b!, c!]) t.equal(p.barrier.takeChanged(), true, `${p.id} drops its cache before the change returns`)
  t.equal(b!.barrier.takeChanged(), false, 'once')
  t.strictSame(warnings, [], 'everyone answered')
})

t.test('a process that does not answer is waited for one lease, and it trusts no cache meanwhile', async (t) => {
  const leaseMs = 150
  const { made: [a, b], stopAll, warnings } = await processes(leaseMs, ['a', 'b'])
  t.teardown(stopAll)
  b!.bus.cut = true
  const started = Date.now()
  await a!.barrier.bump()
  const waited = Date.now() - started
  t.ok(waited >= leaseMs - 5, `the writer waited a lease (${waited} ms)`)
  t.match(warnings, [{ processes: ['b'] }], 'and says who did not answer')
  t.equal(b!.barrier.takeChanged(), true, 'the cut-off process verifies every request')
  t.equal(b!.barrier.takeChanged(), true, 'every one of them')
})

t.test('a dead process stops being waited for as soon as it leaves the live set', async (t) => {
  const leaseMs = 3_000
  const { made: [a, b], live, stopAll, warnings } = await processes(leaseMs, ['a', 'b'])
  t.teardown(stopAll)
  b!.bus.cut = true
  setTimeout(() => live.delete('b'), 20)
  const started = Date.now()
  await a!.barrier.bump()
  const waited = Date.now() - started
  t.ok(waited < leaseMs, `returned before the lease was up (${waited} ms): the live set is read again meanwhile`)
  t.strictSame(warnings, [], 'nobody left unanswered')
})

t.test('a process that heard nothing for a lease drops its cache when it hears again', async (t) => {
  const leaseMs = 90
  const { made: [, b], stopAll } = await processes(leaseMs, ['a', 'b'])
  t.teardown(stopAll)
  t.equal(b!.barrier.takeChanged(), false)
  b!.bus.cut = true
  await new Promise((resolve) => setTimeout(resolve, leaseMs + 20))
  b!.bus.cut = false
  await new Promise((resolve) => setTimeout(resolve, leaseMs / 3 + 20)) // the next heartbeat
  t.equal(b!.barrier.takeChanged(), true, 'what it may have missed meanwhile is not trusted')
  t.equal(b!.barrier.takeChanged(), false, 'then it trusts its cache again')
})

t.test('the command line waits for the servers without serving anything itself', async (t) => {
  const { hub, made: [a], stopAll } = await processes(60_000, ['a'])
  t.teardown(stopAll)
  const cli = credentialBarrier({ bus: hub.bus(), processId: 'cli', leaseMs: 60_000, liveIds: async () => ['a'], warn: quiet })
  await cli.start({ serving: false })
  t.teardown(() => cli.stop())
  await cli.bump()
  t.equal(a!.barrier.takeChanged(), true, 'the server dropped its cache before the command returned')
})
