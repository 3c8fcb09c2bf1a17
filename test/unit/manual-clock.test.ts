import t from 'tap'
import { ManualClock } from '../helpers/clock.js'

t.test('advance fires due timers in the order of their times, each at its own time', async (t) => {
  const clock = new ManualClock(1_000)
  const fired: Array<[string, number]> = []
  clock.setTimeout(() => void fired.push(['b', clock.now()]), 20)
  clock.setTimeout(() => void fired.push(['a', clock.now()]), 10)
  clock.setTimeout(() => void fired.push(['late', clock.now()]), 31)
  clock.setTimeout(() => void fired.push(['a2', clock.now()]), 10)
  await clock.advance(30)
  t.strictSame(fired, [['a', 1_010], ['a2', 1_010], ['b', 1_020]], 'due ones only, by time then by creation')
  t.equal(clock.now(), 1_030, 'now is where advance stopped')
  await clock.advance(1)
  t.strictSame(fired.at(-1), ['late', 1_031])
  t.equal(clock.pendingTimers, 0)
})

t.test('intervals repeat; cleared timers never fire; time never goes back', async (t) => {
  const clock = new ManualClock(0)
  const ticks: number[] = []
  const interval = clock.setInterval(() => void ticks.push(clock.now()), 50)
  const cancelled = clock.setTimeout(() => void ticks.push(-1), 60)
  clock.clearTimer(cancelled)
  await clock.advance(160)
  t.strictSame(ticks, [50, 100, 150])
  clock.clearTimer(interval)
  await clock.advance(100)
  t.strictSame(ticks, [50, 100, 150], 'a cleared interval stops')
  await t.rejects(clock.advance(-1), /only moves forward/)
})

t.test('the promise a callback returns is awaited before the next timer fires', async (t) => {
  const clock = new ManualClock(0)
  const seen: string[] = []
  clock.setTimeout(async () => {
    await new Promise((resolve) => setTimeout(resolve, 30))
    seen.push('slow work done')
  }, 10)
  clock.setTimeout(() => void seen.push('next timer'), 10)
  await clock.advance(10)
  t.strictSame(seen, ['slow work done', 'next timer'])
})

t.test('work a timer starts settles before the next timer fires', async (t) => {
  const clock = new ManualClock(0)
  const seen: string[] = []
  clock.setTimeout(() => void Promise.resolve().then(() => Promise.resolve()).then(() => seen.push('first done')), 10)
  clock.setTimeout(() => void seen.push('second'), 20)
  await clock.advance(20)
  t.strictSame(seen, ['first done', 'second'])
})
