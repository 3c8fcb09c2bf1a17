import t from 'tap'
import { isoTime } from '../../src/lib/iso-time.js'

t.test('isoTime matches Date#toISOString', async (t) => {
  const fixed = [0, 1, 999, 1000, 59_999, 86_399_999, 86_400_000, 951_782_400_000, 1_763_716_800_123, 253_402_300_799_999]
  for (const ms of fixed) t.equal(isoTime(ms), new Date(ms).toISOString(), String(ms))
  let mismatches = 0
  for (let i = 0; i < 20_000; i++) {
    const ms = Math.floor(Math.random() * 253_402_300_800_000)
    if (isoTime(ms) !== new Date(ms).toISOString()) mismatches++
  }
  t.equal(mismatches, 0, 'random instants across years 1970–9999')
  t.equal(isoTime(-1), new Date(-1).toISOString(), 'before 1970 falls back to Date')
  t.equal(isoTime(1.5), new Date(1.5).toISOString(), 'non-integers fall back to Date')
})
