import type { FastifyBaseLogger } from 'fastify'
import t from 'tap'
import { DiskSpace } from '../../src/observability/disk-space.js'

/** DiskSpace against a measure the test sets: the answer, and one log line per change (not per check). */

function recorder() {
  const lines: Array<{ level: string; msg: string }> = []
  const at = (level: string) => (_obj: unknown, msg: string) => lines.push({ level, msg })
  return { lines, log: { warn: at('warn'), info: at('info'), error: at('error') } as unknown as FastifyBaseLogger }
}

const MIB = 1024 * 1024

t.test('under the threshold: not enough, one warning; back above: enough, one info line', async (t) => {
  const { lines, log } = recorder()
  let free = 10 * MIB
  const space = new DiskSpace('/data', 4 * MIB, log, async () => free)
  t.equal(await space.enough(), true)
  t.equal(await space.enough(), true)
  t.same(lines, [], 'nothing logged while there is room')
  free = 4 * MIB
  t.equal(await space.enough(), true, 'exactly the threshold is enough')
  free = 4 * MIB - 1
  t.equal(await space.enough(), false)
  t.equal(await space.enough(), false)
  t.equal(lines.length, 1, 'one warning, however often it is checked')
  t.equal(lines[0]!.level, 'warn')
  t.match(lines[0]!.msg, /4\.0 MiB free .* under SERVICE_DISK_MIN_FREE_MB \(4\.0 MiB\)/)
  free = 5 * MIB
  t.equal(await space.enough(), true)
  t.equal(lines.length, 2)
  t.equal(lines[1]!.level, 'info')
  t.match(lines[1]!.msg, /5\.0 MiB free .* again/)
})

t.test('a folder that cannot be measured counts as low', async (t) => {
  const { lines, log } = recorder()
  const space = new DiskSpace('/gone', MIB, log, async () => {
    throw Object.assign(new Error('ENOENT: no such file or directory'), { code: 'ENOENT' })
  })
  t.equal(await space.enough(), false)
  t.equal(lines.length, 1)
  t.match(lines[0]!.msg, /cannot be measured/)
})
