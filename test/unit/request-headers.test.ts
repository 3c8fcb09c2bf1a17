import type { IncomingHttpHeaders } from 'node:http'
import t, { type Test } from 'tap'
import { decodeHeaderValue, paramHeadersProblem, standardHeadersProblem as standardHeadersProblemOf } from '../../src/plugins/mcp-transport/request-headers.js'
import type { ParamHeader } from '../../src/plugins/tools/param-headers.js'
import type { ServiceError } from '../../src/errors/service-error.js'

/** The params `Mcp-Name` mirrors, as the methods declare them (`mirroredName`; the e2e tests check the declarations). */
const MCP_NAME_SOURCE: Readonly<Record<string, string>> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' }
const standardHeadersProblem = (headers: IncomingHttpHeaders, method: string, params: Record<string, unknown> | undefined) =>
  standardHeadersProblemOf(headers, method, params, MCP_NAME_SOURCE[method])

const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`

/** Node lowercases header names: tests pass them that way, as the server receives them. */
const STANDARD = { 'mcp-protocol-version': '2026-07-28' }

function mismatch(t: Test, problem: ServiceError | null, header: string, what: string): void {
  t.ok(problem, `${what}: refused`)
  t.equal(problem?.code, 'HEADER_MISMATCH', `${what}: HEADER_MISMATCH (-32020)`)
  t.equal(problem?.status, 400, `${what}: HTTP 400`)
  t.equal((problem?.details as { header?: string } | null)?.header, header, `${what}: details name ${header}`)
}

t.test('decodeHeaderValue: literal values', async (t) => {
  t.equal(decodeHeaderValue('service_whoami'), 'service_whoami')
  t.equal(decodeHeaderValue(''), '', 'empty is a literal empty value')
  t.equal(decodeHeaderValue('a b\tc ~!'), 'a b\tc ~!', 'visible ASCII, space and tab pass')
  t.equal(decodeHeaderValue('TOOLS/LIST'), 'TOOLS/LIST', 'case is kept')
  t.equal(decodeHeaderValue('café'), undefined, 'non-ASCII literal refused')
  t.equal(decodeHeaderValue('世界'), undefined, 'CJK literal refused')
  t.equal(decodeHeaderValue('a\u0000b'), undefined, 'NUL refused')
  t.equal(decodeHeaderValue('a\nb'), undefined, 'LF refused')
  t.equal(decodeHeaderValue('a\u007fb'), undefined, 'DEL refused')
})

t.test('decodeHeaderValue: the =?base64?…?= sentinel', async (t) => {
  t.equal(decodeHeaderValue('=?base64?SGVsbG8=?='), 'Hello', 'padded base64')
  t.equal(decodeHeaderValue(b64('Hello, 世界')), 'Hello, 世界', 'UTF-8 content')
  t.equal(decodeHeaderValue('=?base64?SGVsbG8sIOS4lueVjA==?='), 'Hello, 世界', 'the spec example bytes')
  t.equal(decodeHeaderValue(b64('ab')), 'ab', 'one = of padding')
  t.equal(decodeHeaderValue(b64('abc')), 'abc', 'no padding needed')
  t.equal(decodeHeaderValue('=?base64??='), '', 'empty payload decodes to the empty string')
  t.equal(decodeHeaderValue(b64('  spaced  ')), '  spaced  ', 'whitespace inside the value survives')
  t.equal(decodeHeaderValue(b64('line\nbreak')), 'line\nbreak', 'control characters are allowed once encoded')
  t.equal(decodeHeaderValue('=?base64?SGVsbG8?='), undefined, 'unpadded refused')
  t.equal(decodeHeaderValue('=?base64?SGVsbG8=?=x'), '=?base64?SGVsbG8=?=x', 'not ending with ?= is literal')
  t.equal(decodeHeaderValue('=?base64?SGVs!!!bG8=?='), undefined, 'non-alphabet characters refused')
  t.equal(decodeHeaderValue('=?base64?SGVs bG8=?='), undefined, 'a space inside the base64 refused')
  t.equal(decodeHeaderValue('=?base64?SGVsbG8_?='), undefined, 'base64url alphabet refused')
  t.equal(decodeHeaderValue('=?base64?SGVsbG8==?='), undefined, 'too much padding refused')
  t.equal(decodeHeaderValue('=?base64?S===?='), undefined, 'a lone character refused')
  t.equal(decodeHeaderValue('=?base64?/w==?='), undefined, 'bytes that are not UTF-8 refused (0xff)')
  t.equal(decodeHeaderValue('=?base64?wyg=?='), undefined, 'truncated UTF-8 sequence refused')
  // Only the prefix, or only the suffix: the value is taken literally.
  t.equal(decodeHeaderValue('=?base64?SGVsbG8='), '=?base64?SGVsbG8=', 'prefix only is literal')
  t.equal(decodeHeaderValue('SGVsbG8=?='), 'SGVsbG8=?=', 'suffix only is literal')
  t.equal(decodeHeaderValue('=?base64?='), '=?base64?=', 'prefix and suffix overlapping is literal')
  t.equal(decodeHeaderValue('=?BASE64?SGVsbG8=?='), '=?BASE64?SGVsbG8=?=', 'the prefix is case-sensitive')
})

t.test('standardHeadersProblem: MCP-Protocol-Version and Mcp-Method must be present', async (t) => {
  mismatch(t, standardHeadersProblem({ 'mcp-method': 'tools/list' }, 'tools/list', {}), 'MCP-Protocol-Version', 'no version header')
  mismatch(t, standardHeadersProblem({ ...STANDARD }, 'tools/list', {}), 'Mcp-Method', 'no method header')
  t.equal(standardHeadersProblem({ ...STANDARD, 'mcp-method': 'tools/list' }, 'tools/list', {}), null, 'both present')
  t.equal(standardHeadersProblem({ ...STANDARD, 'mcp-method': 'tools/list' }, 'tools/list', undefined), null, 'no params')
  // The values of present headers are compared by the ladder, not here.
  t.equal(standardHeadersProblem({ 'mcp-protocol-version': 'x', 'mcp-method': 'y' }, 'tools/list', {}), null, 'presence only')
  t.equal(standardHeadersProblem({ ...STANDARD, 'mcp-method': 'server/discover' }, 'server/discover', {}), null, 'no Mcp-Name for methods without a name')
})

t.test('standardHeadersProblem: Mcp-Name for each method that mirrors a body value', async (t) => {
  for (const [method, source] of Object.entries(MCP_NAME_SOURCE)) {
    const base = { ...STANDARD, 'mcp-method': method }
    const params = { [source]: 'value-1' }
    t.equal(standardHeadersProblem({ ...base, 'mcp-name': 'value-1' }, method, params), null, `${method}: equal`)
    t.equal(standardHeadersProblem({ ...base, 'mcp-name': b64('value-1') }, method, params), null, `${method}: base64 equal`)
    mismatch(t, standardHeadersProblem(base, method, params), 'Mcp-Name', `${method}: missing`)
    mismatch(t, standardHeadersProblem({ ...base, 'mcp-name': 'value-2' }, method, params), 'Mcp-Name', `${method}: different`)
    mismatch(t, standardHeadersProblem({ ...base, 'mcp-name': 'VALUE-1' }, method, params), 'Mcp-Name', `${method}: values are case-sensitive`)
    const different = standardHeadersProblem({ ...base, 'mcp-name': 'value-2' }, method, params)
    t.same(different?.details, { header: 'Mcp-Name', body: `params.${source}` }, `${method}: details name both sides`)
  }
  const base = { ...STANDARD, 'mcp-method': 'tools/call' }
  mismatch(t, standardHeadersProblem({ ...base, 'mcp-name': '=?base64?SGVsbG8?=' }, 'tools/call', { name: 'Hello' }), 'Mcp-Name', 'unpadded base64')
  mismatch(t, standardHeadersProblem({ ...base, 'mcp-name': 'café' }, 'tools/call', { name: 'café' }), 'Mcp-Name', 'non-ASCII literal, even when equal')
  t.equal(standardHeadersProblem({ ...base, 'mcp-name': b64('café') }, 'tools/call', { name: 'café' }), null, 'non-ASCII through base64')
  t.equal(standardHeadersProblem({ ...base, 'mcp-name': '=?base64?SGVsbG8=' }, 'tools/call', { name: '=?base64?SGVsbG8=' }), null, 'prefix-only value compared literally')
  mismatch(t, standardHeadersProblem({ ...base, 'mcp-name': '=?base64?SGVsbG8=' }, 'tools/call', { name: 'Hello' }), 'Mcp-Name', 'prefix-only value is not decoded')
  // A missing or non-string body value is left to params validation (-32602), not refused here.
  t.equal(standardHeadersProblem(base, 'tools/call', {}), null, 'no params.name')
  t.equal(standardHeadersProblem(base, 'tools/call', { name: 5 }), null, 'params.name not a string')
  t.equal(standardHeadersProblem(base, 'tools/call', undefined), null, 'no params')
  // Repeated headers reach the server as an array (Node keeps some as such): they are joined and compared as one.
  const repeated: IncomingHttpHeaders = { ...base, 'mcp-name': ['a', 'b'] as unknown as string }
  mismatch(t, standardHeadersProblem(repeated, 'tools/call', { name: 'a' }), 'Mcp-Name', 'two Mcp-Name values')
})

const REGION: ParamHeader = { path: ['region'], name: 'Region', type: 'string' }
const COUNT: ParamHeader = { path: ['count'], name: 'Count', type: 'integer' }
const DRY: ParamHeader = { path: ['dryRun'], name: 'Dry-Run', type: 'boolean' }
const ZONE: ParamHeader = { path: ['target', 'zone'], name: 'Zone', type: 'string' }
const ALL = [REGION, COUNT, DRY, ZONE]

t.test('paramHeadersProblem: strings', async (t) => {
  t.equal(paramHeadersProblem({ 'mcp-param-region': 'eu-west-1' }, [REGION], { region: 'eu-west-1' }), null, 'equal')
  mismatch(t, paramHeadersProblem({}, [REGION], { region: 'eu-west-1' }), 'Mcp-Param-Region', 'missing while set')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'us-east-1' }, [REGION], { region: 'eu-west-1' }), 'Mcp-Param-Region', 'different')
  t.same(paramHeadersProblem({ 'mcp-param-region': 'us-east-1' }, [REGION], { region: 'eu-west-1' })?.details, { header: 'Mcp-Param-Region', body: 'arguments.region' })
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'EU-WEST-1' }, [REGION], { region: 'eu-west-1' }), 'Mcp-Param-Region', 'case-sensitive value')
  t.equal(paramHeadersProblem({}, [REGION], {}), null, 'absent argument: no header expected')
  t.equal(paramHeadersProblem({}, [REGION], { region: null }), null, 'null argument: no header expected')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'x' }, [REGION], {}), 'Mcp-Param-Region', 'a header without its argument disagrees with the body')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'x' }, [REGION], { region: null }), 'Mcp-Param-Region', 'a header for a null argument disagrees with the body')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'Z\u00fcrich' }, [REGION], {}), 'Mcp-Param-Region', 'invalid characters are refused even without the argument')
  t.equal(paramHeadersProblem({}, [REGION], undefined), null, 'no arguments at all')
  t.equal(paramHeadersProblem({ 'mcp-param-region': '=?base64?SGVsbG8=?=' }, [REGION], { region: 'Hello' }), null, 'base64 decoded')
  t.equal(paramHeadersProblem({ 'mcp-param-region': b64('Hello, 世界') }, [REGION], { region: 'Hello, 世界' }), null, 'UTF-8 base64')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': '=?base64?SGVsbG8?=' }, [REGION], { region: 'Hello' }), 'Mcp-Param-Region', 'unpadded')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': '=?base64?SGVs!!!bG8=?=' }, [REGION], { region: 'Hello' }), 'Mcp-Param-Region', 'non-alphabet')
  t.equal(paramHeadersProblem({ 'mcp-param-region': '=?base64?SGVsbG8=' }, [REGION], { region: '=?base64?SGVsbG8=' }), null, 'prefix only: literal')
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': 'Zürich' }, [REGION], { region: 'Zürich' }), 'Mcp-Param-Region', 'non-ASCII literal refused')
  t.equal(paramHeadersProblem({ 'mcp-param-region': '' }, [REGION], { region: '' }), null, 'empty string mirrored as empty')
  t.equal(paramHeadersProblem({ 'mcp-param-region': '42' }, [REGION], { region: '42' }), null)
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': '42.0' }, [REGION], { region: '42' }), 'Mcp-Param-Region', 'strings are not compared numerically')
})

t.test('paramHeadersProblem: integers compare numerically', async (t) => {
  t.equal(paramHeadersProblem({ 'mcp-param-count': '42' }, [COUNT], { count: 42 }), null)
  t.equal(paramHeadersProblem({ 'mcp-param-count': '42.0' }, [COUNT], { count: 42 }), null, '42.0 matches 42')
  t.equal(paramHeadersProblem({ 'mcp-param-count': '042' }, [COUNT], { count: 42 }), null, 'leading zero')
  t.equal(paramHeadersProblem({ 'mcp-param-count': '-7' }, [COUNT], { count: -7 }), null, 'negative')
  t.equal(paramHeadersProblem({ 'mcp-param-count': '0' }, [COUNT], { count: 0 }), null, 'zero is a value (header expected)')
  mismatch(t, paramHeadersProblem({}, [COUNT], { count: 0 }), 'Mcp-Param-Count', 'zero without header')
  mismatch(t, paramHeadersProblem({ 'mcp-param-count': '43' }, [COUNT], { count: 42 }), 'Mcp-Param-Count', 'different number')
  mismatch(t, paramHeadersProblem({ 'mcp-param-count': '42.5' }, [COUNT], { count: 42 }), 'Mcp-Param-Count', 'fraction')
  mismatch(t, paramHeadersProblem({ 'mcp-param-count': 'forty-two' }, [COUNT], { count: 42 }), 'Mcp-Param-Count', 'not a number')
  mismatch(t, paramHeadersProblem({ 'mcp-param-count': '4.2e1' }, [COUNT], { count: 42 }), 'Mcp-Param-Count', 'exponent form is not a decimal')
  t.equal(paramHeadersProblem({ 'mcp-param-count': b64('42') }, [COUNT], { count: 42 }), null, 'base64 of the number')
  // Values that are not the declared primitive are left to argument validation.
  t.equal(paramHeadersProblem({}, [COUNT], { count: 1.5 }), null, 'a fraction in the body is not mirrored')
  t.equal(paramHeadersProblem({}, [COUNT], { count: 2 ** 60 }), null, 'an unsafe integer is not mirrored')
  t.equal(paramHeadersProblem({ 'mcp-param-count': '42' }, [COUNT], { count: '42' }), null, 'a string where an integer is declared: mirrored as the string')
  t.equal(paramHeadersProblem({}, [COUNT], { count: [42] }), null, 'an array')
  t.equal(paramHeadersProblem({}, [COUNT], { count: { n: 42 } }), null, 'an object')
})

t.test('paramHeadersProblem: booleans', async (t) => {
  t.equal(paramHeadersProblem({ 'mcp-param-dry-run': 'true' }, [DRY], { dryRun: true }), null)
  t.equal(paramHeadersProblem({ 'mcp-param-dry-run': 'false' }, [DRY], { dryRun: false }), null, 'false is a value (header expected)')
  mismatch(t, paramHeadersProblem({}, [DRY], { dryRun: false }), 'Mcp-Param-Dry-Run', 'false without header')
  mismatch(t, paramHeadersProblem({ 'mcp-param-dry-run': 'True' }, [DRY], { dryRun: true }), 'Mcp-Param-Dry-Run', 'True is not true')
  mismatch(t, paramHeadersProblem({ 'mcp-param-dry-run': '1' }, [DRY], { dryRun: true }), 'Mcp-Param-Dry-Run', '1 is not true')
  mismatch(t, paramHeadersProblem({ 'mcp-param-dry-run': 'false' }, [DRY], { dryRun: true }), 'Mcp-Param-Dry-Run', 'opposite')
})

t.test('paramHeadersProblem: nested paths and several declarations', async (t) => {
  t.equal(paramHeadersProblem({ 'mcp-param-zone': 'b' }, [ZONE], { target: { zone: 'b' } }), null, 'nested equal')
  mismatch(t, paramHeadersProblem({}, [ZONE], { target: { zone: 'b' } }), 'Mcp-Param-Zone', 'nested missing')
  t.same(paramHeadersProblem({ 'mcp-param-zone': 'c' }, [ZONE], { target: { zone: 'b' } })?.details, { header: 'Mcp-Param-Zone', body: 'arguments.target.zone' })
  t.equal(paramHeadersProblem({}, [ZONE], { target: {} }), null, 'nested absent')
  t.equal(paramHeadersProblem({}, [ZONE], { target: null }), null, 'parent null')
  t.equal(paramHeadersProblem({}, [ZONE], { target: [{ zone: 'b' }] }), null, 'parent array is not walked')
  const headers = { 'mcp-param-region': 'eu', 'mcp-param-count': '3', 'mcp-param-dry-run': 'true', 'mcp-param-zone': 'b' }
  const args = { region: 'eu', count: 3, dryRun: true, target: { zone: 'b' } }
  t.equal(paramHeadersProblem(headers, ALL, args), null, 'all four agree')
  mismatch(t, paramHeadersProblem({ ...headers, 'mcp-param-zone': 'z' }, ALL, args), 'Mcp-Param-Zone', 'the last one differs')
  const first = paramHeadersProblem({ 'mcp-param-count': '9' }, ALL, args)
  t.equal((first?.details as { header: string }).header, 'Mcp-Param-Region', 'the first declared failure is reported')
  t.equal(paramHeadersProblem({}, [], args), null, 'no declarations')
  // Duplicate header lines arrive joined: "eu, eu" is not "eu".
  mismatch(t, paramHeadersProblem({ 'mcp-param-region': ['eu', 'eu'] as unknown as string }, [REGION], { region: 'eu' }), 'Mcp-Param-Region', 'a repeated header')
})
