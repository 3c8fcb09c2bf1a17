import t from 'tap'
import { classify as classifyWith, hasClaim, metaOf, namesModernRevision, type Route } from '../../src/plugins/mcp-transport/classify.js'
import { ServiceError } from '../../src/errors/service-error.js'

// Every row of the era routing table (classify.ts header comment), plus the edges of its helpers.

/** initialize is the method that opens a session (the sessions plugin declares it `sessionless`). */
const classify = (body: unknown, header: string | undefined) => classifyWith(body, header, (method) => method === 'initialize')
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion'
const CAPS_KEY = 'io.modelcontextprotocol/clientCapabilities'
const MODERN = '2026-07-28'

function request(method: string, params?: unknown, id: unknown = 1): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }
}
function notification(method: string, params?: unknown): Record<string, unknown> {
  return { jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }) }
}
function claimed(version: unknown = MODERN, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...extra, _meta: { [VERSION_KEY]: version, [CAPS_KEY]: {} } }
}

function rejected(route: Route): { id: unknown; error: ServiceError } {
  if (route.era !== 'reject') throw new Error(`expected a rejection, got ${route.era}`)
  return route
}

t.test('namesModernRevision: served revision and any later date are modern; legacy and garbage are not', async (t) => {
  t.equal(namesModernRevision(MODERN), true, 'the served revision')
  t.equal(namesModernRevision('2027-01-01'), true, 'a future date: a newer client is still a modern client')
  t.equal(namesModernRevision('2026-07-29'), true, 'the day after')
  t.equal(namesModernRevision('2026-07-27'), false, 'the day before')
  for (const legacy of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) t.equal(namesModernRevision(legacy), false, `legacy ${legacy}`)
  t.equal(namesModernRevision(undefined), false, 'absent')
  for (const junk of ['', 'latest', 'v999.0.0', '2026-07-28x', ' 2026-07-28', '2026-07-28 ', '20270101', '2027-1-1', '2027/01/01', 'TOOLS/LIST', '2026-07-28, 2026-07-28']) {
    t.equal(namesModernRevision(junk), false, `garbage ${JSON.stringify(junk)}`)
  }
})

t.test('metaOf / hasClaim: only an object params._meta holding the version key is a claim', async (t) => {
  t.same(metaOf(request('x', claimed())), { [VERSION_KEY]: MODERN, [CAPS_KEY]: {} })
  t.equal(metaOf(request('x', { _meta: [] })), undefined, '_meta array')
  t.equal(metaOf(request('x', { _meta: 'x' })), undefined, '_meta string')
  t.equal(metaOf(request('x', { _meta: null })), undefined, '_meta null')
  t.equal(metaOf(request('x', [{ _meta: {} }])), undefined, 'params array')
  t.equal(metaOf(request('x')), undefined, 'no params')
  t.equal(metaOf(null), undefined)
  t.equal(metaOf('text'), undefined)
  t.equal(hasClaim(request('x', claimed())), true)
  t.equal(hasClaim(request('x', claimed(undefined))), true, 'the key alone is the claim, whatever its value')
  t.equal(hasClaim(request('x', claimed(123))), true, 'a non-string value still claims (the envelope refuses it)')
  t.equal(hasClaim(request('x', { _meta: { [CAPS_KEY]: {} } })), false, '_meta without the version key')
  t.equal(hasClaim(request('x', { [VERSION_KEY]: MODERN })), false, 'the key outside _meta')
  t.equal(hasClaim(request('x', { _meta: { 'io.modelcontextprotocol/protocolversion': MODERN } })), false, 'keys are case-sensitive')
})

t.test('row: a request or notification whose params._meta claims a revision is modern', async (t) => {
  for (const header of [undefined, MODERN, '2025-11-25', 'garbage']) {
    const body = request('tools/list', claimed(), 7)
    const route = classify(body, header)
    t.equal(route.era, 'modern', `request, header ${header}`)
    if (route.era === 'modern') {
      t.equal(route.kind, 'request')
      t.equal(route.message, body, 'the message is the body itself')
      t.equal(route.claim, MODERN)
    }
  }
  // The claim routes, whatever it names: the modern ladder answers -32022 or -32602 for it.
  for (const claim of ['v999.0.0', '2025-11-25', 42, null]) {
    const route = classify(request('tools/list', claimed(claim)), MODERN)
    t.equal(route.era, 'modern', `claim ${JSON.stringify(claim)} is routed modern`)
    if (route.era === 'modern') t.equal(route.claim, claim)
  }
  const note = classify(notification('notifications/cancelled', claimed()), undefined)
  t.equal(note.era, 'modern')
  if (note.era === 'modern') t.equal(note.kind, 'notification')
  // A request with a null id still has the request shape ('id' in body).
  const nullId = classify(request('tools/list', claimed(), null), undefined)
  t.ok(nullId.era === 'modern' && nullId.kind === 'request', 'id null is a request shape')
})

t.test('row: initialize without a claim naming a modern revision is the legacy handshake', async (t) => {
  const init = request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } })
  t.same(classify(init, undefined), { era: 'legacy' }, 'no header')
  t.same(classify(init, '2025-11-25'), { era: 'legacy' }, 'legacy header')
  t.same(classify(init, '2025-03-26'), { era: 'legacy' })
  t.same(classify(init, 'garbage'), { era: 'legacy' }, 'garbage header: legacy answers it')
  t.same(classify(request('initialize', claimed('2025-11-25')), undefined), { era: 'legacy' }, 'a claim naming a legacy revision')
  t.same(classify(request('initialize', claimed('v999.0.0')), undefined), { era: 'legacy' }, 'a claim naming no revision')
  t.same(classify(request('initialize', claimed(5)), undefined), { era: 'legacy' }, 'a non-string claim')
})

t.test('row: initialize WITH a modern claim is modern (answered 404 -32601 there)', async (t) => {
  for (const claim of [MODERN, '2027-01-01']) {
    const route = classify(request('initialize', claimed(claim)), MODERN)
    t.equal(route.era, 'modern', claim)
    if (route.era === 'modern') t.equal(route.kind, 'request')
  }
})

t.test('row: initialize without a claim, header naming a modern revision → -32020', async (t) => {
  for (const header of [MODERN, '2027-01-01']) {
    const { id, error } = rejected(classify(request('initialize', { protocolVersion: '2025-11-25', capabilities: {} }, 'init-1'), header))
    t.equal(id, 'init-1', 'the id is echoed')
    t.equal(error.code, 'HEADER_MISMATCH')
    t.equal(error.status, 400)
    t.same(error.details, { header: 'MCP-Protocol-Version', value: header })
    t.match(error.message, header)
  }
  const legacyClaim = rejected(classify(request('initialize', claimed('2025-11-25'), 3), MODERN))
  t.equal(legacyClaim.error.code, 'HEADER_MISMATCH', 'a legacy claim with a modern header disagrees too')
  t.equal(legacyClaim.id, 3)
})

t.test('row: no claim, header naming a modern revision → -32602 naming what is missing', async (t) => {
  const noMeta = rejected(classify(request('tools/list', {}, 9), MODERN))
  t.equal(noMeta.id, 9)
  t.equal(noMeta.error.code, 'INVALID_PARAMS')
  t.same(noMeta.error.details, { missing: ['params._meta'] })
  const noParams = rejected(classify(request('tools/list', undefined, 'a'), MODERN))
  t.equal(noParams.id, 'a')
  t.same(noParams.error.details, { missing: ['params._meta'] }, 'no params at all')
  const metaNotObject = rejected(classify(request('tools/list', { _meta: 'x' }), MODERN))
  t.same(metaNotObject.error.details, { missing: ['params._meta'] }, '_meta that is not an object counts as missing')
  const metaWithoutVersion = rejected(classify(request('tools/list', { _meta: { [CAPS_KEY]: {} } }), MODERN))
  t.same(metaWithoutVersion.error.details, { missing: [`params._meta["${VERSION_KEY}"]`] })
  const future = rejected(classify(request('tools/list', {}, 2), '2027-01-01'))
  t.equal(future.error.code, 'INVALID_PARAMS', 'a future-date header is modern too')
  // Unreadable ids are answered with id null.
  t.equal(rejected(classify(request('tools/list', {}, 1.5), MODERN)).id, null, 'fractional id')
  t.equal(rejected(classify(request('tools/list', {}, { x: 1 }), MODERN)).id, null, 'object id')
  t.equal(rejected(classify(request('tools/list', {}, null), MODERN)).id, null, 'null id')
})

t.test('no claim, modern header, notification: modern notification (accepted, no effect)', async (t) => {
  const route = classify(notification('notifications/cancelled', {}), MODERN)
  t.equal(route.era, 'modern')
  if (route.era === 'modern') {
    t.equal(route.kind, 'notification')
    t.equal(route.claim, MODERN, 'the header stands for the claim')
  }
})

t.test('row: no claim, header legacy, absent or garbage → legacy', async (t) => {
  for (const header of [undefined, '2025-11-25', '2025-06-18', '2025-03-26', 'garbage', '', '2026-07-27']) {
    t.same(classify(request('tools/list', {}), header), { era: 'legacy' }, `header ${JSON.stringify(header)}`)
    t.same(classify(request('tools/call', { name: 'x', _meta: { progressToken: 1 } }), header), { era: 'legacy' }, `_meta without the claim, header ${JSON.stringify(header)}`)
    t.same(classify(notification('notifications/initialized'), header), { era: 'legacy' }, `notification, header ${JSON.stringify(header)}`)
  }
})

t.test('row: a JSON-RPC response is legacy, whatever the header says', async (t) => {
  for (const header of [undefined, MODERN, '2027-01-01']) {
    t.same(classify({ jsonrpc: '2.0', id: 5, result: { action: 'accept', content: { confirm: true } } }, header), { era: 'legacy' })
    t.same(classify({ jsonrpc: '2.0', id: 5, error: { code: -1, message: 'x' } }, header), { era: 'legacy' })
  }
})

t.test('row: batches — legacy when every element is legacy, -32600 with any modern element', async (t) => {
  t.same(classify([request('tools/list', {}, 1), notification('notifications/initialized')], undefined), { era: 'legacy' })
  t.same(classify([request('tools/list', {}, 1)], MODERN), { era: 'legacy' }, 'the header does not matter for batches')
  t.same(classify([], undefined), { era: 'legacy' }, 'an empty batch is left to legacy (-32600 there)')
  for (const batch of [
    [request('tools/list', {}, 1), request('tools/list', claimed(), 2)],
    [request('tools/list', claimed(), 2)],
    [notification('notifications/cancelled', claimed())],
    [request('initialize', claimed())],
  ]) {
    const { id, error } = rejected(classify(batch, undefined))
    t.equal(id, null, 'a batch has no single id')
    t.equal(error.code, 'INVALID_REQUEST')
    t.equal(error.status, 400)
  }
})

t.test('row: anything else (not JSON-RPC) is legacy, which answers -32600', async (t) => {
  for (const junk of [null, 'text', 42, true, {}, { jsonrpc: '2.0' }, { method: 5, params: claimed() }, { id: 1, params: claimed() }]) {
    t.same(classify(junk, MODERN), { era: 'legacy' }, JSON.stringify(junk))
  }
})
