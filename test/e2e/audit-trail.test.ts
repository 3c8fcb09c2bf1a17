// test-backends: both (rows edited, deleted and inserted by hand in each dialect's SQL; the CLI on that database)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { cli } from '../helpers/cli.js'
import { injectServer, type InjectServer } from '../helpers/inject.js'
import { callTool, openSession, post } from '../helpers/mcp.js'
import { rawSql } from '../helpers/raw-sql.js'

/**
 * The audit trail a team hands over (issue 29): tool calls chained per organization, `audit verify` naming the first
 * row edited, deleted or inserted by hand in SQL, and an export verified from the file and the published key set
 * alone (docs/decisions/audit-chain.md).
 */

t.setTimeout(120_000)

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-audit-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

async function auditedServer(t: Test): Promise<{ server: InjectServer; verify: (...args: string[]) => ReturnType<typeof cli> }> {
  const server = await injectServer(t)
  const session = await openSession(server.mcpUrl, server.apiKey)
  for (let i = 1; i <= 6; i++) {
    const reply = await post(server.mcpUrl, callTool('service_apps_create', { name: `audited-${i}` }, i), session.headers)
    t.equal(reply.status, 200)
  }
  return { server, verify: (...args) => cli(['audit', 'verify', ...args], server.cliEnv) }
}

t.test('audit verify: an intact chain, then one row edited, one deleted and one inserted by hand, each named', async (t) => {
  const { server, verify } = await auditedServer(t)
  const sql = await rawSql(t, server.dbPath)
  const intact = await verify('--org', 'default')
  t.equal(intact.code, 0, intact.stderr)
  t.match(intact.stdout, /^default: intact, \d+ entries/m)

  const rows = await sql('SELECT id, seq, details FROM audit_log WHERE seq IS NOT NULL ORDER BY seq')
  t.ok(rows.length >= 6, 'every app creation is an entry')
  const third = rows[2]!
  const details = typeof third.details === 'string' ? third.details : JSON.stringify(third.details)

  await sql('UPDATE audit_log SET details = ? WHERE id = ?', [JSON.stringify({ ...JSON.parse(details), name: 'someone-else' }), third.id])
  const edited = await verify('--org', 'default')
  t.equal(edited.code, 1)
  t.match(edited.stdout, new RegExp(`Entry ${third.id} \\(seq ${third.seq}\\) does not match its hash: it was edited`))
  t.match(edited.stderr, /altered/)
  await sql('UPDATE audit_log SET details = ? WHERE id = ?', [details, third.id])
  t.equal((await verify('--org', 'default')).code, 0, 'intact again once the row is put back')

  const fourth = (await sql('SELECT * FROM audit_log WHERE seq = ?', [4]))[0]!
  await sql('DELETE FROM audit_log WHERE id = ?', [fourth.id])
  const deleted = await verify('--org', 'default')
  t.equal(deleted.code, 1)
  t.match(deleted.stdout, /Entry seq 4 is missing .* it was deleted/)
  const columns = Object.keys(fourth)
  await sql(`INSERT INTO audit_log (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, columns.map((c) => (c === 'details' && typeof fourth[c] !== 'string' ? JSON.stringify(fourth[c]) : fourth[c])))
  t.equal((await verify('--org', 'default')).code, 0, 'intact again once the row is back')

  await sql(`INSERT INTO audit_log (id, organization_id, credential_kind, action, outcome, at) SELECT 'aud_forged', organization_id, 'oauth', 'service_apps_delete', 'succeeded', at FROM audit_log WHERE id = ?`, [third.id])
  const inserted = await verify('--org', 'default')
  t.equal(inserted.code, 1)
  t.match(inserted.stdout, /Entry aud_forged has no place in the chain: it was inserted/)
})

t.test('audit export, verified from the file and the published key set alone', async (t) => {
  const { server } = await auditedServer(t)
  const dir = tempDir(t)
  const file = join(dir, 'trail.jsonl')
  const exported = await cli(['audit', 'export', '--org', 'default', '--format', 'jsonl', '--output', file], server.cliEnv)
  t.equal(exported.code, 0, exported.stderr)
  const keys = join(dir, 'jwks.json')
  writeFileSync(keys, (await server.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).body)
  // No database: the file and the keys.
  const alone = (...args: string[]) => cli(['audit', 'verify', ...args], { SERVICE_DATABASE: join(dir, 'none.db') })
  const ok = await alone('--file', file, '--keys', keys)
  t.equal(ok.code, 0, ok.stderr)
  t.match(ok.stdout, /intact, \d+ entries, signed through seq \d+$/m)

  const lines = readFileSync(file, 'utf8').trim().split('\n')
  const at = lines.findIndex((l) => l.includes('"type":"entry"') && l.includes('audited-2'))
  const tampered = join(dir, 'tampered.jsonl')
  writeFileSync(tampered, lines.map((l, i) => (i === at ? l.replace('audited-2', 'audited-X') : l)).join('\n'))
  const edited = await alone('--file', tampered, '--keys', keys)
  t.equal(edited.code, 1)
  t.match(edited.stdout, /does not match its hash: it was edited/)

  const foreign = join(dir, 'other-jwks.json')
  writeFileSync(foreign, JSON.stringify({ keys: [] }))
  const unproven = await alone('--file', file, '--keys', foreign)
  t.equal(unproven.code, 1, 'keys that sign none of its checkpoints prove nothing')
  t.match(unproven.stderr, /no checkpoint of the export verifies with these keys/)
})

t.test('an entry records who, through what, the action, the outcome and the arguments, never an env var value', async (t) => {
  const server = await injectServer(t)
  const session = await openSession(server.mcpUrl, server.apiKey)
  const created = await post(server.mcpUrl, callTool('service_apps_create', { name: 'with-secret' }, 1), session.headers)
  const appId = (created.json ?? created.messages.at(-1)).result.structuredContent.app.id as string
  const secret = 'hunter2-' + 'S'.repeat(20)
  const set = await post(server.mcpUrl, callTool('service_env_set', { app_id: appId, name: 'DB_PASSWORD', value: secret }, 2), session.headers)
  t.equal(set.status, 200)
  const sql = await rawSql(t, server.dbPath)
  const rows = await sql('SELECT * FROM audit_log ORDER BY seq')
  t.notOk(JSON.stringify(rows).includes('hunter2'), 'the value is nowhere in the audit log')
  const entry = rows.find((r) => r.action === 'service_env_set')!
  const details = (typeof entry.details === 'string' ? JSON.parse(entry.details) : entry.details) as Record<string, unknown>
  t.same(details.arguments, { app_id: appId, name: 'DB_PASSWORD', value: '[redacted]' })
  t.match(entry, { credential_kind: 'api_key', outcome: 'succeeded', target_type: 'env_var', target_id: `${appId}/DB_PASSWORD` })
  t.ok(entry.credential_id && entry.user_id && entry.membership_id, 'the key, the user and the membership that acted')
})
