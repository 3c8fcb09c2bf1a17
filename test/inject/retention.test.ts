// test-backends: both (the cap's output_bytes, the purge's queries and the audit anchor run on each dialect's SQL)
import t, { type Test } from 'tap'
import type { Deployment, DeploymentLogLine } from '../../src/db/repos/deployments.js'
import { cli } from '../helpers/cli.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { defaultOrganization } from '../helpers/seed.js'
import { callToEnd } from '../helpers/tools.js'
import { rawSql } from '../helpers/raw-sql.js'

/**
 * Retention (issue 29; docs/operating.md, "Retention"): the per-run cap on stored output, the purge of old runs' output
 * by count and by age on the server's clock, requests served between the purge's batches, and audit retention that
 * keeps the chain verifiable by `service-mcp audit verify`.
 */

t.setTimeout(120_000)

const DAY = 86_400_000
const node = (code: string) => ({ argv: [process.execPath, '-e', code] })
/** 300 stdout lines of 40 bytes each (12,000 bytes), and one on stderr. */
const VERBOSE = node("for (let i = 0; i < 300; i++) console.log('line ' + String(i).padStart(4, '0') + ' ' + 'x'.repeat(29)); console.error('done on stderr')")

const bytes = (lines: Array<Pick<DeploymentLogLine, 'line'>>) => lines.reduce((n, l) => n + Buffer.byteLength(l.line, 'utf8'), 0)

async function storedLines(server: InjectServer, deploymentId: string): Promise<DeploymentLogLine[]> {
  return (await server.app.repos.deployments.lines(deploymentId, 10_000)).items
}

async function session(server: InjectServer): Promise<Record<string, string>> {
  return (await openSession(server.mcpUrl, server.apiKey)).headers
}

let rpcId = 1
async function tool(server: InjectServer, headers: Record<string, string>, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const { result } = await callToEnd(server.mcpUrl, headers, name, args, rpcId++)
  if (result.isError) throw new Error(`${name}: ${result.content[0].text}`)
  return result.structuredContent
}

t.test('a verbose deployment past the per-run cap: the stored log is cut with a line saying where and why, the run succeeds, every line is streamed', async (t) => {
  const server = await injectServer(t, { config: { pipelines: { verbose: VERBOSE }, deploymentOutputMaxBytes: 2000 } })
  const org = await defaultOrganization(server)
  const app = await server.app.repos.apps.create({ organizationId: org.id, name: 'chatty', pipeline: 'verbose' })
  const streamed: DeploymentLogLine[] = []
  const handle = await server.app.pipelines.start({ organizationId: org.id, appId: app.id, kind: 'deploy', createdBy: null }, { onLine: (l) => streamed.push(l) })
  const final = await handle.done
  t.equal(final.status, 'succeeded', 'the run went on to its end')

  const streamedOut = streamed.filter((l) => l.stream === 'stdout')
  t.equal(streamedOut.length, 300, 'every stdout line reached the listener (what the tool streams to the client)')
  t.ok(streamed.some((l) => l.stream === 'stderr' && l.line === 'done on stderr'), 'stderr after the cut is streamed too')
  t.same(streamed.map((l) => l.seq), streamed.map((_, i) => i), 'the streamed lines are numbered without a gap')

  const stored = await storedLines(server, handle.deployment.id)
  const cut = stored.findIndex((l) => l.stream === 'system' && l.line.startsWith('output cut here'))
  t.ok(cut > 0, 'the stored log holds the cut notice')
  const notice = stored[cut]!
  t.match(notice.line, /SERVICE_DEPLOYMENT_OUTPUT_MAX_BYTES \(2000\)/, 'the notice names the setting and its value')
  t.match(notice.line, new RegExp(`output cut here \\(seq ${notice.seq}\\): \\d+ bytes`), 'and where: the seq and the bytes stored')
  const keptOut = stored.filter((l) => l.stream === 'stdout')
  t.ok(keptOut.length > 0 && keptOut.length < 300, `only the first stdout lines are stored (${keptOut.length})`)
  t.ok(bytes(stored.slice(0, cut)) <= 2000, 'what is stored before the notice stays within the cap')
  t.same(keptOut.map((l) => l.line), streamedOut.slice(0, keptOut.length).map((l) => l.line), 'the stored stdout is the start of the output')
  t.notOk(stored.slice(cut + 1).some((l) => l.stream !== 'system'), 'no stdout or stderr is stored after the notice')
  t.match(stored.at(-1)!.line, /^succeeded: /, 'the run\'s end is stored after the notice')
  t.ok(streamed.some((l) => l.seq === notice.seq && l.line === notice.line), 'the client hears the notice too, under the same seq')

  const row = (await server.app.repos.deployments.byId(org.id, handle.deployment.id))!
  t.equal(row.outputBytes, bytes(stored), 'output_bytes counts exactly the stored lines')

  const logs = await tool(server, await session(server), 'service_deployments_logs', { deployment_id: row.id, limit: 500 })
  t.ok(logs.lines.some((l: any) => l.line === notice.line), 'service_deployments_logs returns the notice')
  t.equal(logs.next_cursor, null)
})

t.test('without a cap (0) every line is stored', async (t) => {
  const server = await injectServer(t, { config: { pipelines: { verbose: VERBOSE }, deploymentOutputMaxBytes: 0 } })
  const org = await defaultOrganization(server)
  const app = await server.app.repos.apps.create({ organizationId: org.id, name: 'chatty', pipeline: 'verbose' })
  const handle = await server.app.pipelines.start({ organizationId: org.id, appId: app.id, kind: 'deploy', createdBy: null })
  t.equal((await handle.done).status, 'succeeded')
  const stored = await storedLines(server, handle.deployment.id)
  t.equal(stored.filter((l) => l.stream === 'stdout').length, 300)
  t.equal((await server.app.repos.deployments.byId(org.id, handle.deployment.id))!.outputBytes, bytes(stored))
})

/** An ended (or, with `status` queued/running, live) run of `appId` with `lines` stored output lines, ended at `at`. */
async function seedRun(server: InjectServer, organizationId: string, appId: string, at: number, lines = 4, status: Deployment['status'] = 'succeeded'): Promise<string> {
  const repos = server.app.repos
  const d = await repos.deployments.create({ organizationId, appId, kind: 'deploy', pipeline: 'default', createdBy: null })
  await repos.deployments.markRunning(d.id, at)
  await repos.deployments.appendLines(Array.from({ length: lines }, (_, seq) => ({ deploymentId: d.id, seq, stream: 'stdout' as const, line: `output ${seq} of ${d.id}`, at })))
  if (status !== 'running') await repos.deployments.finish(d.id, status as 'succeeded', at, 0, `${status}: seeded`)
  return d.id
}

t.test('retention by count: the newest N ended runs of each app keep their output; live runs are never touched; the tools say what was deleted and when', async (t) => {
  const server = await injectServer(t, { config: { deploymentOutputKeepRuns: 3, deploymentOutputKeepDays: 0, retentionIntervalMs: 1000, retentionBatch: 2 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const web = await repos.apps.create({ organizationId: org.id, name: 'web', pipeline: 'default' })
  const api = await repos.apps.create({ organizationId: org.id, name: 'api', pipeline: 'default' })
  const now = server.clock.now()
  const live = await seedRun(server, org.id, web.id, now, 3, 'running')
  const webRuns: string[] = []
  for (let i = 0; i < 6; i++) webRuns.push(await seedRun(server, org.id, web.id, now, 5, i % 2 ? 'failed' : 'succeeded'))
  const apiRuns = [await seedRun(server, org.id, api.id, now), await seedRun(server, org.id, api.id, now)]

  await server.clock.advance(999)
  t.equal((await storedLines(server, webRuns[0]!)).length, 5, 'nothing is purged before the interval')
  await server.clock.advance(1)
  const purgedAt = server.clock.now()

  for (const id of webRuns.slice(0, 3)) {
    const d = (await repos.deployments.byId(org.id, id))!
    t.equal(d.outputPurgedAt, purgedAt, `${id}: marked purged at the purge's time`)
    t.equal(d.outputBytes, 0)
    t.match(d.status, /succeeded|failed/, 'its status stays')
    t.equal((await storedLines(server, id)).length, 0, `${id}: its lines are gone`)
  }
  for (const id of [...webRuns.slice(3), ...apiRuns]) {
    const d = (await repos.deployments.byId(org.id, id))!
    t.equal(d.outputPurgedAt, null, `${id}: among the newest 3 of its app, kept`)
    t.equal((await storedLines(server, id)).length, d.appId === web.id ? 5 : 4)
    t.ok(d.outputBytes > 0)
  }
  t.equal((await storedLines(server, live)).length, 3, 'a running run keeps its output, however old')
  t.equal((await repos.deployments.byId(org.id, live))!.outputPurgedAt, null)
  t.same(await repos.deployments.markOutputPurged([live], purgedAt), [], 'even named, a running run is not marked')

  const headers = await session(server)
  const logs = await tool(server, headers, 'service_deployments_logs', { deployment_id: webRuns[0] })
  t.same(logs.lines, [])
  t.equal(logs.next_cursor, null)
  t.equal(logs.output_deleted.at, new Date(purgedAt).toISOString())
  t.match(logs.output_deleted.message, /deleted by retention at .*SERVICE_DEPLOYMENT_OUTPUT_KEEP_RUNS/)
  const got = await tool(server, headers, 'service_deployments_get', { deployment_id: webRuns[0] })
  t.same(got.last_lines, [])
  t.equal(got.output_deleted.at, new Date(purgedAt).toISOString())
  t.equal(got.deployment.id, webRuns[0], 'the deployment itself is still there')
  const kept = await tool(server, headers, 'service_deployments_get', { deployment_id: webRuns[5] })
  t.equal(kept.output_deleted, undefined, 'a kept run says nothing of retention')
  t.equal(kept.last_lines.length, 5)

  const read = await post(server.mcpUrl, { jsonrpc: '2.0', id: rpcId++, method: 'resources/read', params: { uri: `service://deployments/${webRuns[0]}/log` } }, headers)
  t.match(read.json.result.contents[0].text, /^\[The output of deployment .* was deleted by retention at /, 'the log resource says so too')
})

t.test('retention by age, on the server\'s clock: output of runs that ended more than D days ago goes', async (t) => {
  const server = await injectServer(t, { config: { deploymentOutputKeepRuns: 0, deploymentOutputKeepDays: 2, retentionIntervalMs: 1000, retentionBatch: 500 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const web = await repos.apps.create({ organizationId: org.id, name: 'web', pipeline: 'default' })
  const now = server.clock.now()
  // Two days old 1.5 s from now (between the first and the second purge), and 10 s from now.
  const old = await seedRun(server, org.id, web.id, now - 2 * DAY + 1500)
  const young = await seedRun(server, org.id, web.id, now - 2 * DAY + 10_000)

  await server.clock.advance(1000)
  t.equal((await repos.deployments.byId(org.id, old))!.outputPurgedAt, null, 'not yet two days old: kept')
  await server.clock.advance(1000)
  t.equal((await repos.deployments.byId(org.id, old))!.outputPurgedAt, now + 2000, 'more than two days old: purged by the next purge')
  t.equal((await storedLines(server, old)).length, 0)
  t.equal((await repos.deployments.byId(org.id, young))!.outputPurgedAt, null, 'the run that ended later is kept')
  t.equal((await storedLines(server, young)).length, 4)
  await server.clock.advance(8000)
  t.equal((await repos.deployments.byId(org.id, young))!.outputPurgedAt, null, 'exactly two days old: kept')
  await server.clock.advance(1000)
  t.equal((await repos.deployments.byId(org.id, young))!.outputPurgedAt, now + 11_000, 'then it goes too')
})

t.test('requests are served between the purge\'s batches: a call made between two batches finishes while the purge is still going', async (t) => {
  const server = await injectServer(t, { config: { deploymentOutputKeepRuns: 1, deploymentOutputKeepDays: 0, retentionIntervalMs: 1000 * DAY, retentionBatch: 5 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const web = await repos.apps.create({ organizationId: org.id, name: 'web', pipeline: 'default' })
  const runs: string[] = []
  for (let i = 0; i < 3; i++) runs.push(await seedRun(server, org.id, web.id, server.clock.now(), 40))
  const headers = await session(server)

  const countLines = async () => (await storedLines(server, runs[0]!)).length + (await storedLines(server, runs[1]!)).length
  const order: string[] = []
  let batches = 0
  let duringCall: { linesLeft: number; appName: string } | undefined
  const purge = server.app.retention.run({
    betweenBatches: async () => {
      batches++
      if (batches !== 3) return
      // Two batches are done, more are due: a write (an app, and its audit entry) and a read both get through now.
      const created = await tool(server, headers, 'service_apps_create', { name: 'made-during-purge' })
      const listed = await tool(server, headers, 'service_deployments_list', { app_id: web.id })
      order.push('calls answered')
      duringCall = { linesLeft: await countLines(), appName: created.app.name }
      t.equal(listed.total, 3)
    },
  }).then((report) => {
    order.push('purge done')
    return report
  })
  const report = await purge
  t.same(order, ['calls answered', 'purge done'], 'the calls finished before the purge did')
  t.ok(duringCall && duringCall.linesLeft > 0 && duringCall.linesLeft < 80, `the purge was half done when they were answered (${duringCall?.linesLeft} of 80 lines left)`)
  t.equal(duringCall?.appName, 'made-during-purge')
  t.equal(report.deploymentRuns, 2)
  t.equal(report.deploymentLines, 80)
  t.ok(batches >= 80 / 5, `the lines went in batches of 5 (${batches} pauses)`)
  t.equal(await countLines(), 0)
})

t.test('a purge that stopped after marking a run deletes its lines at the next one', async (t) => {
  const server = await injectServer(t, { config: { deploymentOutputKeepRuns: 0, deploymentOutputKeepDays: 0, retentionIntervalMs: 1000, retentionBatch: 3 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const web = await repos.apps.create({ organizationId: org.id, name: 'web', pipeline: 'default' })
  const marked = await seedRun(server, org.id, web.id, server.clock.now(), 7)
  const kept = await seedRun(server, org.id, web.id, server.clock.now(), 7)
  t.same(await repos.deployments.markOutputPurged([marked], server.clock.now()), [marked], 'marked, as a purge does first')
  t.same(await repos.deployments.markOutputPurged([marked], server.clock.now()), [], 'a run is marked once')
  await server.clock.advance(1000)
  t.equal((await storedLines(server, marked)).length, 0, 'its lines went, though both limits are off')
  t.equal((await storedLines(server, kept)).length, 7, 'no limit: the other run keeps its output')
})

t.test('audit retention: a signed start checkpoint first, then the old entries go; verify stays intact and still names a deletion after the anchor', async (t) => {
  const server = await injectServer(t, { config: { auditRetentionDays: 30, retentionIntervalMs: 1000 * DAY, retentionBatch: 2 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const verify = () => cli(['audit', 'verify', '--org', 'default'], server.cliEnv)
  const entry = (action: string, at: number) => repos.audit.add({
    organizationId: org.id, userId: null, membershipId: null, credentialKind: 'cli', credentialId: null, clientId: null,
    action, targetType: null, targetId: null, outcome: 'succeeded', details: { note: action }, at,
  })
  const before = (await repos.audit.head(org.id)).seq
  t.equal(before, 0, 'a new server\'s chain is empty')
  for (let i = 0; i < 5; i++) await entry(`old.${i}`, server.clock.now() - 40 * DAY)
  const headers = await session(server)
  for (let i = 0; i < 3; i++) await tool(server, headers, 'service_apps_create', { name: `kept-${i}` })
  const firstKept = (await repos.audit.chain(org.id, 6, 1))[0]!
  t.equal(firstKept.action, 'service_apps_create')
  t.equal((await verify()).code, 0, 'intact before the purge')

  const logged: Array<{ obj: any; msg: string }> = []
  const info = server.app.log.info
  server.app.log.info = ((obj: any, msg: string) => void logged.push({ obj, msg })) as typeof info
  t.teardown(() => void (server.app.log.info = info))
  let midway: Awaited<ReturnType<typeof verify>> | undefined
  let leftMidway = 0
  const report = await server.app.retention.run({
    betweenBatches: async () => {
      if (midway) return
      // The anchor is committed and the first batch deleted; older entries are still there, and verify starts at it.
      leftMidway = (await repos.audit.chain(org.id, 0, 100)).filter((e) => e.seq! < firstKept.seq!).length
      midway = await verify()
    },
  })
  t.equal(leftMidway, 3, 'verified between two batches: 3 old entries were still to go')
  t.equal(midway?.code, 0, `verify while the purge is under way: ${midway?.stdout}`)
  t.same(report.audit.map((p) => ({ organizationId: p.organizationId, startSeq: p.startSeq })), [{ organizationId: org.id, startSeq: firstKept.seq }])
  t.equal(report.audit[0]!.deleted, 5, 'every entry older than 30 days went')
  const start = (await repos.audit.checkpoints(org.id)).filter((c) => c.kind === 'start')
  t.equal(start.length, 1)
  t.equal(start[0]!.seq, firstKept.seq, 'the anchor is the first kept entry\'s seq')
  t.equal(start[0]!.hash, firstKept.prevHash, 'and its prev_hash')
  t.equal((await repos.audit.chain(org.id, 0, 100))[0]!.id, firstKept.id, 'nothing before it is left')
  const line = logged.find((l) => /audit entries older than 30 days/.test(l.msg))
  t.same(line?.obj, { organization: org.id, deleted: 5, start_seq: firstKept.seq }, 'the purge is recorded in the log')
  t.match(line?.msg, new RegExp(`kept chain starts at seq ${firstKept.seq}`))

  const intact = await verify()
  t.equal(intact.code, 0, intact.stdout + intact.stderr)
  t.match(intact.stdout, /^default: intact, 3 entries/m)

  // The chain goes on after the anchor as before.
  await tool(server, headers, 'service_apps_create', { name: 'after-purge' })
  t.equal((await verify()).code, 0, 'an entry written after the purge chains on')

  const sql = await rawSql(t, server.dbPath)
  const victim = (await repos.audit.chain(org.id, firstKept.seq! + 1, 1))[0]!
  await sql('DELETE FROM audit_log WHERE id = ?', [victim.id])
  const deleted = await verify()
  t.equal(deleted.code, 1, 'an entry deleted by hand after the anchor is still found')
  t.match(deleted.stdout, new RegExp(`Entry seq ${victim.seq} is missing .* it was deleted`))
})

t.test('audit retention when every entry goes: the anchor is the place after the head, new entries chain from it; a moved anchor is named', async (t) => {
  const server = await injectServer(t, { config: { auditRetentionDays: 1, retentionIntervalMs: 1000, retentionBatch: 500 } })
  const repos = server.app.repos
  const org = await defaultOrganization(server)
  const verify = () => cli(['audit', 'verify', '--org', 'default'], server.cliEnv)
  const headers = await session(server)
  // A day old 1.5 s from now: between the first purge and the second.
  const at = server.clock.now() - DAY + 1500
  for (let i = 0; i < 3; i++) {
    await repos.audit.add({ organizationId: org.id, userId: null, membershipId: null, credentialKind: 'cli', credentialId: null, clientId: null, action: `gone.${i}`, targetType: null, targetId: null, outcome: 'succeeded', details: null, at })
  }
  const head = await repos.audit.head(org.id)

  await server.clock.advance(1000)
  t.equal(await repos.audit.count(org.id), 3, 'under a day old: kept')
  await server.clock.advance(1000)
  t.equal(await repos.audit.count(org.id), 0, 'past a day: every entry went')
  const [start] = (await repos.audit.checkpoints(org.id)).filter((c) => c.kind === 'start')
  t.equal(start?.seq, head.seq + 1)
  t.equal(start?.hash, head.hash)
  t.same(await repos.audit.head(org.id), head, 'the head is still where the chain ended')
  const empty = await verify()
  t.equal(empty.code, 0, empty.stdout + empty.stderr)

  await tool(server, headers, 'service_apps_create', { name: 'next' })
  const [next] = await repos.audit.chain(org.id, 0, 10)
  t.equal(next?.seq, head.seq + 1, 'the next entry takes the anchor\'s place')
  t.equal(next?.prevHash, head.hash)
  t.equal((await verify()).code, 0)

  const sql = await rawSql(t, server.dbPath)
  await sql('UPDATE audit_checkpoints SET hash = ? WHERE organization_id = ? AND kind = ?', ['0'.repeat(64), org.id, 'start'])
  await sql('UPDATE audit_log SET prev_hash = ? WHERE id = ?', ['0'.repeat(64), next!.id])
  const moved = await verify()
  t.equal(moved.code, 1, 'an anchor rewritten by hand does not verify')
  t.match(moved.stdout, /The start checkpoint at seq \d+ .* does not verify/)
})

t.test('with several processes only the live one with the smallest id purges', async (t) => {
  const { purgesHere } = await import('../../src/retention/purger.js')
  const registry = (id: string, live: string[], exclusive = false) => ({ id, exclusive, liveIds: async () => live })
  t.equal(await purgesHere(registry('proc_b', ['proc_c', 'proc_b'])), true)
  t.equal(await purgesHere(registry('proc_c', ['proc_c', 'proc_b'])), false)
  t.equal(await purgesHere(registry('proc_c', ['proc_c', 'proc_a'], true)), true, 'a process alone on its database always does')
  t.equal(await purgesHere(registry('proc_c', [])), false, 'not even registered: not its turn')
})
