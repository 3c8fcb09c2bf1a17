import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ErrorObject, ValidateFunction } from 'ajv'
import AjvDraft7 from 'ajv'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { ROOT } from './root.js'

/**
 * The official MCP JSON schemas (test/fixtures/mcp-schema/<revision>/schema.json, vendored from
 * modelcontextprotocol/modelcontextprotocol, see the README there), compiled once per revision, so tests can check
 * every message the server sends against the revision the exchange speaks.
 *
 * - `assertValid(t, revision, 'CallToolResult', result)`: the message matches that definition of the revision's
 *   schema. A mismatch fails the assertion with Ajv's errors printed in the failure.
 * - `{ closed: true }`: also, no object carries a property its definition does not name. The official schemas leave
 *   most objects open (extra fields are legal), so this is stricter than the spec: it shows fields of a newer
 *   revision leaking into an older one (`icons` before 2025-11-25, `title` before 2025-06-18, `resultType` in a
 *   session). `_meta` is allowed on every object (the protocol's extension point), and what lies under `_meta`,
 *   `structuredContent`, `data`, tool schemas and other explicitly open objects is never closed.
 */

export const REVISIONS = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'] as const
export type Revision = (typeof REVISIONS)[number]
export const LEGACY_REVISIONS = ['2025-03-26', '2025-06-18', '2025-11-25'] as const
export type LegacyRevision = (typeof LEGACY_REVISIONS)[number]

type Json = Record<string, unknown>

const FIXTURES = join(ROOT, 'test', 'fixtures', 'mcp-schema')

interface Compiled {
  document: Json
  /** `definitions` (draft-07 revisions) or `$defs` (2020-12 revisions). */
  defsKey: 'definitions' | '$defs'
  open: AjvInstance
  closed: AjvInstance
  cache: Map<string, ValidateFunction>
}

type AjvInstance = InstanceType<typeof AjvDraft7.default>

const compiled = new Map<Revision, Compiled>()

function newAjv(document: Json): AjvInstance {
  const draft2020 = String(document.$schema ?? '').includes('2020-12')
  const options = { strict: true, allowUnionTypes: true, allErrors: true, validateSchema: true }
  const ajv = draft2020 ? new Ajv2020.default(options) : new AjvDraft7.default(options)
  addFormats.default(ajv)
  return ajv as AjvInstance
}

function load(revision: Revision): Compiled {
  let c = compiled.get(revision)
  if (c) return c
  const document = JSON.parse(readFileSync(join(FIXTURES, revision, 'schema.json'), 'utf8')) as Json
  const defsKey = document.definitions !== undefined ? 'definitions' : '$defs'
  const open = newAjv(document)
  open.addSchema(document, `mcp-${revision}`)
  const closed = newAjv(document)
  closed.addSchema(closeSchema(document, defsKey), `mcp-${revision}`)
  c = { document, defsKey, open, closed, cache: new Map() }
  compiled.set(revision, c)
  return c
}

/** The names of the definitions a revision's schema has. */
export function definitionsOf(revision: Revision): string[] {
  const c = load(revision)
  return Object.keys(c.document[c.defsKey] as Json)
}

function validatorOf(revision: Revision, definition: string, closed: boolean): ValidateFunction {
  const c = load(revision)
  const key = `${closed ? 'closed' : 'open'}:${definition}`
  let v = c.cache.get(key)
  if (v) return v
  if (!(definition in (c.document[c.defsKey] as Json))) throw new Error(`The ${revision} schema has no definition ${definition}`)
  const found = (closed ? c.closed : c.open).getSchema(`mcp-${revision}#/${c.defsKey}/${definition}`)
  if (!found) throw new Error(`Could not compile ${revision} ${definition}`)
  v = found
  c.cache.set(key, v)
  return v
}

/** Ajv's errors of one failed validation, one per line (anyOf failures list every branch's errors). */
export function describeErrors(errors: ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return '(no errors reported)'
  return errors
    .map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${Object.keys(e.params ?? {}).length ? ' ' + JSON.stringify(e.params) : ''} (${e.schemaPath})`)
    .join('\n')
}

/** The errors of `value` against a definition, or null when it is valid. */
export function schemaErrors(revision: Revision, definition: string, value: unknown, options: { closed?: boolean } = {}): string | null {
  const validate = validatorOf(revision, definition, options.closed === true)
  return validate(value) === true ? null : describeErrors(validate.errors)
}

/** What the assertions need of a tap Test. */
interface Assertions {
  ok(value: any, ...messageAndExtra: any[]): unknown
}

/**
 * Asserts that `message` is valid against `definition` of the revision's official schema; on failure the Ajv errors
 * and the message are printed. With `closed`, also that no object carries a property its definition does not name
 * (a second assertion, so that which of the two failed is plain).
 */
export function assertValid(t: Assertions, revision: Revision, definition: string, message: unknown, options: { closed?: boolean; what?: string } = {}): boolean {
  const what = options.what ? `${options.what}: ` : ''
  const errors = schemaErrors(revision, definition, message)
  t.ok(errors === null, `${what}valid ${revision} ${definition}${errors === null ? '' : `\n${errors}`}`, errors === null ? {} : { errors, found: message })
  let closedOk = true
  // The closed check says something only of a message the schema accepts.
  if (options.closed && errors === null) {
    const extra = schemaErrors(revision, definition, message, { closed: true })
    closedOk = extra === null
    t.ok(closedOk, `${what}no field that ${revision} ${definition} does not define${closedOk ? '' : `\n${extra}`}`, closedOk ? {} : { errors: extra, found: message })
  }
  return errors === null && closedOk
}

// ---- What each method answers, per revision ------------------------------------------------------------------------

const RESULTS: Readonly<Record<string, string>> = {
  initialize: 'InitializeResult',
  ping: 'EmptyResult',
  'tools/list': 'ListToolsResult',
  'tools/call': 'CallToolResult',
  'resources/list': 'ListResourcesResult',
  'resources/templates/list': 'ListResourceTemplatesResult',
  'resources/read': 'ReadResourceResult',
  'resources/subscribe': 'EmptyResult',
  'resources/unsubscribe': 'EmptyResult',
  'prompts/list': 'ListPromptsResult',
  'prompts/get': 'GetPromptResult',
  'completion/complete': 'CompleteResult',
  'logging/setLevel': 'EmptyResult',
  'server/discover': 'DiscoverResult',
  'subscriptions/listen': 'SubscriptionsListenResult',
}

/** The definition of the result of `method` in `revision` (2026-07-28: InputRequiredResult for an input_required one). */
export function resultDefinition(revision: Revision, method: string, result?: unknown): string {
  if (revision === '2026-07-28' && isObject(result) && result.resultType === 'input_required') return 'InputRequiredResult'
  const d = RESULTS[method]
  if (!d) throw new Error(`No result definition known for ${method}`)
  return d
}

/**
 * Asserts that `response` is a JSON-RPC response of `revision` to a `method` request: the envelope (result or error),
 * and a result valid against the method's result definition (`closed` by default: see assertValid).
 */
export function assertResponse(t: Assertions, revision: Revision, method: string, response: unknown, options: { closed?: boolean; what?: string } = {}): boolean {
  const closed = options.closed ?? true
  const what = options.what ?? `${method} response`
  if (!isObject(response)) {
    t.ok(false, `${what}: a JSON-RPC response object`, { found: response })
    return false
  }
  if ('error' in response) {
    const envelope = revision === '2025-03-26' || revision === '2025-06-18' ? 'JSONRPCError' : 'JSONRPCErrorResponse'
    let ok = assertValid(t, revision, envelope, response, { closed, what })
    const code = isObject(response.error) ? response.error.code : undefined
    const specific = revision === '2026-07-28' ? MODERN_ERRORS[String(code)] : undefined
    if (specific) ok = assertValid(t, revision, specific, response.error, { what: `${what} error` }) && ok
    const whole = revision === '2026-07-28' ? MODERN_ERROR_RESPONSES[String(code)] : undefined
    if (whole) ok = assertValid(t, revision, whole, response, { what }) && ok
    return ok
  }
  const envelope = revision === '2025-11-25' || revision === '2026-07-28' ? 'JSONRPCResultResponse' : 'JSONRPCResponse'
  const envelopeOk = assertValid(t, revision, envelope, response, { what })
  const definition = resultDefinition(revision, method, response.result)
  return assertValid(t, revision, definition, response.result, { closed, what: `${what} result` }) && envelopeOk
}

/** 2026-07-28 defines whole error responses for its own codes. */
const MODERN_ERROR_RESPONSES: Readonly<Record<string, string>> = {
  '-32020': 'HeaderMismatchError',
  '-32021': 'MissingRequiredClientCapabilityError',
  '-32022': 'UnsupportedProtocolVersionError',
}

/** 2026-07-28 names the error objects of some codes. */
const MODERN_ERRORS: Readonly<Record<string, string>> = {
  '-32700': 'ParseError',
  '-32600': 'InvalidRequestError',
  '-32601': 'MethodNotFoundError',
  '-32602': 'InvalidParamsError',
  '-32603': 'InternalError',
}

const NOTIFICATIONS: Readonly<Record<string, string>> = {
  'notifications/resources/updated': 'ResourceUpdatedNotification',
  'notifications/resources/list_changed': 'ResourceListChangedNotification',
  'notifications/prompts/list_changed': 'PromptListChangedNotification',
  'notifications/tools/list_changed': 'ToolListChangedNotification',
  'notifications/message': 'LoggingMessageNotification',
  'notifications/progress': 'ProgressNotification',
  'notifications/cancelled': 'CancelledNotification',
  'notifications/elicitation/complete': 'ElicitationCompleteNotification',
  'notifications/subscriptions/acknowledged': 'SubscriptionsAcknowledgedNotification',
}

/** Asserts that `message` is a server notification of `revision`: JSONRPCNotification, ServerNotification and its own definition. */
export function assertNotification(t: Assertions, revision: Revision, message: unknown, options: { closed?: boolean; what?: string } = {}): boolean {
  const method = isObject(message) ? String(message.method) : '?'
  const what = options.what ?? method
  const definition = NOTIFICATIONS[method]
  let ok = assertValid(t, revision, 'JSONRPCNotification', message, { what })
  ok = assertValid(t, revision, 'ServerNotification', message, { what }) && ok
  if (!definition) {
    t.ok(false, `${what}: a notification the tests know (${method})`)
    return false
  }
  return assertValid(t, revision, definition, message, { closed: options.closed ?? true, what }) && ok
}

const SERVER_REQUESTS: Readonly<Record<string, string>> = {
  'elicitation/create': 'ElicitRequest',
  'sampling/createMessage': 'CreateMessageRequest',
  'roots/list': 'ListRootsRequest',
  ping: 'PingRequest',
}

/** Asserts that `message` is a request the server may send in a `revision` session: JSONRPCRequest, ServerRequest, its own definition. */
export function assertServerRequest(t: Assertions, revision: LegacyRevision, message: unknown, options: { closed?: boolean; what?: string } = {}): boolean {
  const method = isObject(message) ? String(message.method) : '?'
  const what = options.what ?? `server request ${method}`
  let ok = assertValid(t, revision, 'JSONRPCRequest', message, { what })
  ok = assertValid(t, revision, 'ServerRequest', message, { what }) && ok
  const definition = SERVER_REQUESTS[method]
  if (!definition || !definitionsOf(revision).includes(definition)) {
    t.ok(false, `${what}: ${revision} defines no server request ${method}`)
    return false
  }
  return assertValid(t, revision, definition, message, { closed: options.closed ?? true, what }) && ok
}

// ---- The closed variant of a schema ---------------------------------------------------------------------------------

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Keywords whose value is one subschema; keywords whose value is a map or an array of subschemas. */
const ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems']
const MANY_MAP = ['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas']
const MANY_LIST = ['anyOf', 'oneOf', 'prefixItems']
/** Properties whose value is never closed: metadata, and JSON Schemas of tools. */
const OPEN_PROPERTIES = new Set(['_meta', 'inputSchema', 'outputSchema'])

/**
 * A copy of `document` in which every object schema that names its properties and says nothing of others refuses
 * others (`additionalProperties: false`), `_meta` always allowed. Left open: schemas under `_meta`, definitions used
 * inside `allOf` (closing a part of an intersection would refuse the other parts' fields), and every schema inside an
 * `allOf`.
 */
function closeSchema(document: Json, defsKey: 'definitions' | '$defs'): Json {
  const copy = structuredClone(document)
  const defs = copy[defsKey] as Record<string, Json>
  const keepOpen = new Set<string>()
  // Definitions reached from an allOf, and meta objects, stay as they are.
  const collectAllOfRefs = (node: unknown, inAllOf: boolean): void => {
    if (Array.isArray(node)) return node.forEach((n) => collectAllOfRefs(n, inAllOf))
    if (!isObject(node)) return
    if (inAllOf && typeof node.$ref === 'string') keepOpen.add(node.$ref.split('/').pop()!)
    for (const [k, v] of Object.entries(node)) collectAllOfRefs(v, inAllOf || k === 'allOf')
  }
  collectAllOfRefs(copy, false)
  for (const name of Object.keys(defs)) if (/MetaObject$/.test(name)) keepOpen.add(name)

  const close = (node: unknown, open: boolean, envelope: 'request' | 'notification' | null = null): void => {
    if (!isObject(node)) return
    if (!open && isObject(node.properties) && !('additionalProperties' in node) && node.type === 'object') {
      node.additionalProperties = false
      const properties = node.properties as Json
      if (!('_meta' in properties)) properties._meta = { type: 'object' }
      // The 2025-03-26 and 2025-06-18 request and notification definitions leave the JSON-RPC envelope out.
      if (envelope !== null && !('jsonrpc' in properties)) properties.jsonrpc = { const: '2.0' }
      if (envelope === 'request' && !('id' in properties)) properties.id = { type: ['string', 'integer'] }
    }
    for (const k of ONE) if (k in node) close(node[k], open)
    for (const k of MANY_MAP) {
      if (!isObject(node[k])) continue
      for (const [name, sub] of Object.entries(node[k] as Json)) {
        if (k === defsKey) close(sub, keepOpen.has(name), /Request$/.test(name) ? 'request' : /Notification$/.test(name) ? 'notification' : null)
        // Schemas a message carries (a tool's input and output schemas) and whatever is under _meta stay open.
        else close(sub, open || (k === 'properties' && OPEN_PROPERTIES.has(name)))
      }
    }
    for (const k of MANY_LIST) if (Array.isArray(node[k])) for (const sub of node[k] as unknown[]) close(sub, open)
    if (Array.isArray(node.allOf)) for (const sub of node.allOf) close(sub, true)
  }
  close(copy, false)
  return copy
}
