import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { catalog, isErrorCode, type ErrorCode, type ErrorSpec } from '../../src/errors/catalog.js'
import { toOAuthBody, toRpcError, toServiceBody, toServiceError, toToolResult, wwwAuthenticate } from '../../src/errors/render.js'
import { fail, isServiceError, ServiceError } from '../../src/errors/service-error.js'
import { ROOT } from '../helpers/root.js'

const root = ROOT
const codes = Object.keys(catalog) as ErrorCode[]
const entries = Object.entries(catalog) as Array<[ErrorCode, ErrorSpec]>

/** Something an error body must never show: stack frames, file paths, SQL. */
const LEAK = /\bat .+:\d+|\.ts:\d+|\.js:\d+|node:internal|SELECT|INSERT|UPDATE .* SET|FROM \w+|SQLITE|sqlite|TypeError|SyntaxError/

t.test('catalog', async (t) => {
  t.ok(codes.length > 0)
  for (const [code, spec] of entries) {
    t.match(code, /^[A-Z][A-Z_]*[A-Z]$/, `${code}: UPPER_SNAKE_CASE`)
    t.ok(typeof spec.message === 'string' && spec.message.trim().length > 0, `${code}: non-empty message`)
    t.ok(typeof spec.action === 'string' && spec.action.trim().length > 0, `${code}: non-empty action`)
    t.ok(Number.isInteger(spec.status) && spec.status >= 200 && spec.status <= 599, `${code}: HTTP status`)
    if (spec.rpc !== undefined) {
      const standard = [-32700, -32600, -32601, -32602, -32603].includes(spec.rpc)
      const serverRange = spec.rpc <= -32000 && spec.rpc >= -32099
      t.ok(Number.isInteger(spec.rpc) && (standard || serverRange), `${code}: rpc ${spec.rpc} is a JSON-RPC code`)
    }
    if (spec.oauth !== undefined) t.match(spec.oauth, /^[a-z_]+$/, `${code}: oauth code`)
  }
})

t.test('catalog codes the contract names', async (t) => {
  for (const code of ['INVALID_TOKEN', 'TOKEN_EXPIRED', 'TOKEN_REVOKED', 'INSUFFICIENT_SCOPE', 'SESSION_NOT_FOUND', 'IDEMPOTENCY_CONFLICT',
    'PAYLOAD_TOO_LARGE', 'RATE_LIMITED', 'FORBIDDEN_ORIGIN', 'NOT_ACCEPTABLE', 'UNSUPPORTED_MEDIA_TYPE', 'UNSUPPORTED_PROTOCOL_VERSION',
    'RESOURCE_NOT_FOUND', 'PERMISSION_DENIED', 'INVALID_ARGUMENTS', 'CONFLICT', 'CAPABILITY_REQUIRED', 'ELICITATION_DENIED',
    'ELICITATION_TIMEOUT', 'OPERATION_CANCELLED', 'OPERATION_FAILED', 'INTERNAL_ERROR']) {
    t.ok(isErrorCode(code), code)
  }
  const status: Record<string, number> = { INVALID_TOKEN: 401, TOKEN_EXPIRED: 401, TOKEN_REVOKED: 401, INSUFFICIENT_SCOPE: 403, SESSION_NOT_FOUND: 404,
    IDEMPOTENCY_CONFLICT: 409, PAYLOAD_TOO_LARGE: 413, RATE_LIMITED: 429, FORBIDDEN_ORIGIN: 403, NOT_ACCEPTABLE: 406, UNSUPPORTED_MEDIA_TYPE: 415,
    UNSUPPORTED_PROTOCOL_VERSION: 400 }
  for (const [code, s] of Object.entries(status)) t.equal(catalog[code as ErrorCode].status, s, `${code} is HTTP ${s}`)
  t.equal(catalog.PARSE_ERROR.rpc, -32700)
  t.equal(catalog.INVALID_REQUEST.rpc, -32600)
  t.equal(catalog.METHOD_NOT_FOUND.rpc, -32601)
  t.equal(catalog.INVALID_PARAMS.rpc, -32602)
  t.equal(catalog.INTERNAL_ERROR.rpc, -32603)
  t.notOk(isErrorCode('toString'), 'inherited properties are not codes')
  t.notOk(isErrorCode('nope'))
})

t.test('ServiceError', async (t) => {
  const e = new ServiceError('RATE_LIMITED', { retryAfter: 7, headers: { 'retry-after': '7' }, details: { limit: 10 }, cause: new Error('inner') })
  t.ok(e instanceof ServiceError)
  t.ok(e instanceof Error)
  t.ok(isServiceError(e))
  t.notOk(isServiceError(new Error('x')))
  t.equal(e.code, 'RATE_LIMITED')
  t.equal(e.status, 429)
  t.equal(e.message, catalog.RATE_LIMITED.message)
  t.equal(e.action, catalog.RATE_LIMITED.action)
  t.same(e.details, { limit: 10 })
  t.equal(e.retryAfter, 7)
  t.same(e.headers, { 'retry-after': '7' })
  t.equal(new ServiceError('CONFLICT', { message: 'App billing already exists' }).message, 'App billing already exists')
  t.equal(new ServiceError('CONFLICT').details, null)
})

// A handler that writes `fail('X')` without `throw` must stop there (docs/decisions/tool-failures.md).
t.test('fail throws the ServiceError itself, its stack starting at the caller', async (t) => {
  function findApp(): string {
    fail('RESOURCE_NOT_FOUND', { message: 'No app app_9' })
  }
  let thrown: unknown
  try {
    findApp()
  } catch (err) {
    thrown = err
  }
  if (!isServiceError(thrown)) return t.fail(`a ServiceError is thrown, not ${String(thrown)}`)
  t.equal(thrown.code, 'RESOURCE_NOT_FOUND')
  t.equal(thrown.message, 'No app app_9')
  t.match(thrown.stack, /^ServiceError: No app app_9\n\s+at findApp /, 'the first frame is the function that failed')
})

t.test('toServiceBody', async (t) => {
  const body = toServiceBody(new ServiceError('SESSION_NOT_FOUND', { details: { hint: 'x' } }))
  t.same(body, { error: { code: 'SESSION_NOT_FOUND', message: catalog.SESSION_NOT_FOUND.message, details: { hint: 'x' }, action: catalog.SESSION_NOT_FOUND.action } })
  t.same(Object.keys(body), ['error'])
  t.same(Object.keys(body.error).sort(), ['action', 'code', 'details', 'message'])
  t.equal(toServiceBody(new ServiceError('NOT_FOUND')).error.details, null, 'details is null, not absent')
  t.notOk(JSON.stringify(toServiceBody(new ServiceError('NOT_FOUND', { cause: new Error('SELECT * FROM users') }))).includes('SELECT'), 'the cause is never sent')
})

t.test('toOAuthBody', async (t) => {
  t.same(toOAuthBody(new ServiceError('INVALID_TOKEN')), { error: 'invalid_token', error_description: catalog.INVALID_TOKEN.message })
  t.same(toOAuthBody(new ServiceError('INSUFFICIENT_SCOPE')), { error: 'insufficient_scope', error_description: catalog.INSUFFICIENT_SCOPE.message })
  t.same(toOAuthBody(new ServiceError('BAD_REQUEST', { message: 'redirect_uri is missing' })), { error: 'invalid_request', error_description: 'redirect_uri is missing' })
  const masked = toOAuthBody(new Error('SQLITE_BUSY: database is locked'))
  t.same(masked, { error: 'server_error', error_description: 'Internal error' })
})

t.test('toRpcError', async (t) => {
  t.same(toRpcError(new ServiceError('INVALID_PARAMS', { details: [{ path: '/x', message: 'is required' }] })), {
    code: -32602,
    message: 'Invalid params',
    data: { code: 'INVALID_PARAMS', action: catalog.INVALID_PARAMS.action, details: [{ path: '/x', message: 'is required' }] },
  })
  const noDetails = toRpcError(new ServiceError('METHOD_NOT_FOUND'))
  t.equal(noDetails.code, -32601)
  t.notOk(noDetails.data && 'details' in noDetails.data, 'no details key when there are none')
  t.equal(toRpcError(new ServiceError('SESSION_NOT_FOUND')).code, -32001)
  t.equal(toRpcError(new ServiceError('PARSE_ERROR')).code, -32700)
  t.equal(toRpcError(new ServiceError('CONFLICT')).code, -32000, 'codes without an rpc number fall back to -32000')
  t.equal(toRpcError(new ServiceError('CONFLICT')).data?.code, 'CONFLICT', 'but keep their own code in data')
})

t.test('toToolResult', async (t) => {
  const r = toToolResult(new ServiceError('RESOURCE_NOT_FOUND'))
  t.equal(r.isError, true)
  t.equal(r.content.length, 1)
  t.equal(r.content[0]!.type, 'text')
  t.equal(r.content[0]!.text, JSON.stringify({ code: 'RESOURCE_NOT_FOUND', message: catalog.RESOURCE_NOT_FOUND.message }))
  t.same(JSON.parse(r.content[0]!.text), { code: 'RESOURCE_NOT_FOUND', message: catalog.RESOURCE_NOT_FOUND.message })
  t.same(r._meta, { guidance: { action: catalog.RESOURCE_NOT_FOUND.action } })
  const limited = toToolResult(new ServiceError('RATE_LIMITED', { retryAfter: 12 }))
  t.same(limited._meta, { guidance: { action: catalog.RATE_LIMITED.action, retryAfter: 12 } })
  const custom = toToolResult(new ServiceError('CONFLICT', { message: 'An app named billing already exists' }))
  t.equal(custom.content[0]!.text, JSON.stringify({ code: 'CONFLICT', message: 'An app named billing already exists' }))
  const details = { quota: 'apps', limit: 3, usage: 3, setting: 'SERVICE_QUOTA_APPS' }
  const quota = toToolResult(new ServiceError('QUOTA_EXCEEDED', { message: 'Quota apps reached', details }))
  t.same(JSON.parse(quota.content[0]!.text), { code: 'QUOTA_EXCEEDED', message: 'Quota apps reached', details }, 'details go with the error when it has some')
})

t.test('masking: a plain Error and INTERNAL_ERROR never leak', async (t) => {
  const secrets = [
    new Error('SELECT password_hash FROM users WHERE email = ?'),
    new TypeError("Cannot read properties of undefined (reading 'id')"),
    new ServiceError('INTERNAL_ERROR', { message: 'SQLITE_CONSTRAINT: UNIQUE constraint failed: apps.name at /srv/src/db/repos/apps.ts:42', details: { sql: 'INSERT INTO apps' } }),
    'a thrown string with SELECT',
    { some: 'object', sql: 'UPDATE users SET x = 1' },
    null,
    undefined,
  ]
  for (const err of secrets) {
    const label = err instanceof Error ? err.message : String(err)
    const e = toServiceError(err)
    t.equal(e.code, 'INTERNAL_ERROR', label)
    t.equal(e.status, 500)
    const service = toServiceBody(err)
    t.same(service, { error: { code: 'INTERNAL_ERROR', message: 'Internal error', details: null, action: catalog.INTERNAL_ERROR.action } }, `service body: ${label}`)
    const rpc = toRpcError(err)
    t.same(rpc, { code: -32603, message: 'Internal error', data: { code: 'INTERNAL_ERROR', action: catalog.INTERNAL_ERROR.action } }, `rpc: ${label}`)
    const tool = toToolResult(err)
    t.equal(tool.content[0]!.text, JSON.stringify({ code: 'INTERNAL_ERROR', message: 'Internal error' }), `tool: ${label}`)
    const all = JSON.stringify([service, rpc, tool, toOAuthBody(err)])
    t.notMatch(all, LEAK, `nothing leaks: ${label}`)
    t.notMatch(all, /password_hash|constraint|undefined/i)
  }
})

t.test('exposed errors pass through unchanged', async (t) => {
  for (const code of codes) {
    if (catalog[code].status >= 500) continue
    const e = new ServiceError(code)
    t.equal(toServiceError(e), e, code)
  }
})

t.test('wwwAuthenticate', async (t) => {
  t.equal(wwwAuthenticate({ resourceMetadata: 'http://h/.well-known/oauth-protected-resource/mcp' }), 'Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp"')
  t.equal(
    wwwAuthenticate({ resourceMetadata: 'http://h/m', error: 'insufficient_scope', errorDescription: 'needs "write" \\ scope', scope: 'mcp:write' }),
    'Bearer error="insufficient_scope", error_description="needs write  scope", scope="mcp:write", resource_metadata="http://h/m"',
    'quotes and backslashes are removed from the description',
  )
})

/** Codes in the first column of the table under `## Error codes` in docs/protocol.md (the README links it). */
function readmeCodes(): { codes: string[]; status: Map<string, string>; problem?: string } {
  const path = join(root, 'docs', 'protocol.md')
  const status = new Map<string, string>()
  if (!existsSync(path)) return { codes: [], status, problem: 'docs/protocol.md does not exist' }
  const text = readFileSync(path, 'utf8')
  const lines = text.split(/\r?\n/)
  const start = lines.findIndex((l) => /^##\s+Error codes\s*$/.test(l))
  if (start === -1) return { codes: [], status, problem: 'docs/protocol.md has no "## Error codes" section' }
  const section: string[] = []
  for (const line of lines.slice(start + 1)) {
    if (/^#{1,2}\s/.test(line)) break
    section.push(line)
  }
  const found: string[] = []
  for (const line of section) {
    if (!line.trim().startsWith('|')) continue
    const cells = line.trim().replace(/^\|/, '').split('|').map((c) => c.trim())
    const m = /^`([A-Z][A-Z0-9_]*)`$/.exec(cells[0]!)
    if (!m) continue
    found.push(m[1]!)
    status.set(m[1]!, cells[1] ?? '')
  }
  return { codes: found, status }
}

t.test('docs/protocol.md "## Error codes" table matches the catalog', async (t) => {
  const { codes: documented, status, problem } = readmeCodes()
  t.notOk(problem, problem ?? 'docs/protocol.md has the section')
  t.ok(documented.length > 0, 'the table lists codes')
  const inCatalog = new Set<string>(codes)
  const inReadme = new Set(documented)
  const undocumented = codes.filter((c) => !inReadme.has(c))
  const unknown = documented.filter((c) => !inCatalog.has(c))
  t.same(undocumented, [], 'every catalog code is documented in docs/protocol.md')
  t.same(unknown, [], 'every documented code exists in the catalog')
  const dupes = documented.filter((c, i) => documented.indexOf(c) !== i)
  t.same(dupes, [], 'each code is listed once')
  // The second column is the HTTP status; when it is a number it must be the catalog's.
  const wrongStatus = documented.filter((c) => inCatalog.has(c) && /^\d{3}$/.test(status.get(c)!) && Number(status.get(c)) !== catalog[c as ErrorCode].status)
  t.same(wrongStatus, [], 'documented HTTP statuses match the catalog')
})
