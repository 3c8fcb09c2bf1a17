// test-backends: sqlite-only (the check measures the SQLite file's folder, on a small file system of its own)
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { injectServer } from '../helpers/inject.js'
import { fill, NO_SMALL_DISK, smallDisk } from '../helpers/small-disk.js'

/**
 * SERVICE_DISK_MIN_FREE_MB on a real file system (a tmpfs of 8 MiB holding the database): /readyz turns unready with
 * a `disk` check when the free space falls under the threshold, and ready again once space is freed; the check also
 * runs every SERVICE_DISK_CHECK_MS (on the server's clock), so the warning reaches the log with nobody polling.
 */

t.test('low free space in the database folder: unready and a warning, then ready again', { skip: NO_SMALL_DISK ?? false }, async (t) => {
  const disk = smallDisk(t, '8m')
  const log: Array<{ level: number; msg: string }> = []
  const server = await injectServer(t, {
    dbPath: join(disk, 'service.db'),
    config: { diskMinFreeMb: 2, diskCheckMs: 60_000, logLevel: 'info' },
    logger: { level: 'info', stream: { write: (line: string) => log.push(JSON.parse(line) as { level: number; msg: string }) } },
  })
  const readyz = async () => {
    const res = await server.app.inject({ method: 'GET', url: '/readyz' })
    return { status: res.statusCode, body: res.json() as unknown }
  }
  const warnings = () => log.filter((l) => l.level === 40 && /^disk space/.test(l.msg))

  t.strictSame(await readyz(), { status: 200, body: { status: 'ok', checks: { database: 'ok', disk: 'ok', shutdown: 'ok' } } })
  const filler = fill(disk)
  t.equal(warnings().length, 0, 'nothing measured yet')
  await server.clock.advance(60_000)
  t.equal(warnings().length, 1, 'the timer found it: the log warns with nobody polling')
  t.match(warnings()[0]!.msg, /under SERVICE_DISK_MIN_FREE_MB \(2\.0 MiB\); reporting unready/)
  t.strictSame(await readyz(), { status: 503, body: { status: 'unavailable', checks: { database: 'ok', disk: 'fail', shutdown: 'ok' } } })
  t.equal(warnings().length, 1, 'warned once')

  rmSync(filler)
  t.strictSame(await readyz(), { status: 200, body: { status: 'ok', checks: { database: 'ok', disk: 'ok', shutdown: 'ok' } } })
  t.ok(log.some((l) => l.level === 30 && /^disk space: .* again; ready$/.test(l.msg)), 'the recovery is logged')
})

t.test('0 turns the check off: no disk check in /readyz', async (t) => {
  const server = await injectServer(t, { config: { diskMinFreeMb: 0 } })
  const res = await server.app.inject({ method: 'GET', url: '/readyz' })
  t.equal(res.statusCode, 200)
  t.notOk('disk' in (res.json() as { checks: Record<string, string> }).checks)
})
