import type { ClientCapabilities } from '../rpc/exchange.js'
import { canElicitForm, canElicitUrl } from '../rpc/exchange.js'
import { describeDetails, validationDetails, validatorFor } from '../validation/index.js'
import type { AudioContent, ImageContent, Role, TextContent } from './content.js'

/**
 * What a handler may ask the client while it runs: a form elicitation, a URL-mode elicitation (a page the person
 * opens in their browser), a sampling (an LLM completion), or the client's roots. The same requests in both eras: a session sends them as server requests on the call's stream; a
 * stateless 2026-07-28 request returns them as the `inputRequests` of an `input_required` result (see the elicitation
 * plugin). Answers are checked here before a handler sees them.
 */

/** A field of an elicitation form: the primitive schemas the spec allows (no nesting). */
export type FormField =
  | { type: 'string'; title?: string; description?: string; minLength?: number; maxLength?: number; format?: 'email' | 'uri' | 'date' | 'date-time'; default?: string; enum?: readonly string[]; enumNames?: readonly string[]; oneOf?: ReadonlyArray<{ const: string; title: string }> }
  | { type: 'number' | 'integer'; title?: string; description?: string; minimum?: number; maximum?: number; default?: number }
  | { type: 'boolean'; title?: string; description?: string; default?: boolean }
  | { type: 'array'; title?: string; description?: string; minItems?: number; maxItems?: number; items: { type?: 'string'; enum?: readonly string[]; anyOf?: ReadonlyArray<{ const: string; title: string }> }; default?: readonly string[] }

export interface ElicitForm {
  readonly type: 'object'
  readonly properties: Readonly<Record<string, FormField>>
  readonly required?: readonly string[]
}

export interface ElicitFormParams {
  mode?: 'form'
  message: string
  requestedSchema: ElicitForm
}

/**
 * A URL-mode elicitation (docs/decisions/url-elicitation.md): the client shows `url` and, with the person's consent,
 * opens it in their browser; what happens there never passes through the client. `elicitationId` names it in the
 * 2025-11-25 revision (and in its completion notification); 2026-07-28 has no such field, so it is not sent there.
 */
export interface ElicitUrlParams {
  mode: 'url'
  message: string
  url: string
  elicitationId: string
}

export type ElicitParams = ElicitFormParams | ElicitUrlParams

export type SamplingContent = TextContent | ImageContent | AudioContent

export interface SamplingMessage {
  role: Role
  content: SamplingContent
}

export interface CreateMessageParams {
  messages: SamplingMessage[]
  maxTokens: number
  systemPrompt?: string
  temperature?: number
  stopSequences?: string[]
  modelPreferences?: { hints?: Array<{ name?: string }>; costPriority?: number; speedPriority?: number; intelligencePriority?: number }
  includeContext?: 'none'
  metadata?: Record<string, unknown>
}

export type InputRequest =
  | { method: 'elicitation/create'; params: ElicitParams }
  | { method: 'sampling/createMessage'; params: CreateMessageParams }
  | { method: 'roots/list'; params?: Record<string, never> }

export type ElicitValue = string | number | boolean | string[]

export interface ElicitResult {
  action: 'accept' | 'decline' | 'cancel'
  /** With accept: the form's fields (only those it asked for). */
  content?: Record<string, ElicitValue>
}

export interface CreateMessageResult {
  role: Role
  /** One block, or several (2025-11-25 clients may answer with an array). */
  content: SamplingContent | SamplingContent[]
  model: string
  stopReason?: string
}

export interface ListRootsResult {
  roots: Array<{ uri: string; name?: string }>
}

/** The answer type of one request. */
export type InputResponse<R extends InputRequest = InputRequest> = R extends { method: 'elicitation/create' }
  ? ElicitResult
  : R extends { method: 'sampling/createMessage' }
    ? CreateMessageResult
    : ListRootsResult

export type InputRequests = Record<string, InputRequest>
export type InputResponses<R extends InputRequests> = { [K in keyof R]: InputResponse<R[K]> }

/**
 * `request` as the era's wire carries it: 2026-07-28 defines no `elicitationId` on a URL-mode elicitation (its
 * requestState correlates the retry), so it is left out there.
 */
export function onTheWire(request: InputRequest, era: 'legacy' | 'modern'): InputRequest {
  if (era === 'legacy' || request.method !== 'elicitation/create' || request.params.mode !== 'url') return request
  const { elicitationId: _id, ...params } = request.params
  return { method: request.method, params: params as ElicitUrlParams }
}

/** The capability a request kind needs, as `requiredCapabilities` names it; null when the client declared it. */
export function missingCapability(request: InputRequest, capabilities: Readonly<ClientCapabilities>): Record<string, unknown> | null {
  switch (request.method) {
    case 'elicitation/create':
      if (request.params.mode === 'url') return canElicitUrl(capabilities) ? null : { elicitation: { url: {} } }
      return canElicitForm(capabilities) ? null : { elicitation: {} }
    case 'sampling/createMessage':
      return isObject(capabilities.sampling) ? null : { sampling: {} }
    case 'roots/list':
      return isObject(capabilities.roots) ? null : { roots: {} }
  }
}

/** How a message names a missing capability: `elicitation.url` for URL mode, else the capability's own name. */
export function capabilityName(required: Record<string, unknown>): string {
  return Object.entries(required).map(([name, v]) => (isObject(v) && isObject(v.url) ? `${name}.url` : name)).join(' and ')
}

const validateElicit = validatorFor('mcp/elicit.result')
const validateSampling = validatorFor('mcp/create-message.result')
const validateRoots = validatorFor('mcp/list-roots.result')

/**
 * Checks a client's answer to `request`. Returns the answer as the handler gets it (a form answer keeps only the
 * fields the form asked for), or why it does not answer the request.
 */
export function checkAnswer(request: InputRequest, answer: unknown): { ok: InputResponse } | { problem: string } {
  switch (request.method) {
    case 'elicitation/create': {
      if (validateElicit(answer) !== true) return { problem: describeDetails(validationDetails(validateElicit.errors)) }
      // A URL-mode answer carries only the person's choice: whatever else a client sends is not kept.
      if (request.params.mode === 'url') return { ok: { action: (answer as unknown as ElicitResult).action } }
      return checkForm(request.params.requestedSchema, answer as unknown as ElicitResult)
    }
    case 'sampling/createMessage': {
      if (validateSampling(answer) !== true) return { problem: describeDetails(validationDetails(validateSampling.errors)) }
      const a = answer as unknown as CreateMessageResult
      return { ok: { role: a.role, content: a.content, model: a.model, ...(a.stopReason !== undefined ? { stopReason: a.stopReason } : {}) } }
    }
    case 'roots/list': {
      if (validateRoots(answer) !== true) return { problem: describeDetails(validationDetails(validateRoots.errors)) }
      const a = answer as unknown as ListRootsResult
      return { ok: { roots: a.roots.map((r) => (r.name !== undefined ? { uri: r.uri, name: r.name } : { uri: r.uri })) } }
    }
  }
}

/** An accepted form answer must fill the required fields with values of the declared types (and enums). */
function checkForm(form: ElicitForm, answer: ElicitResult): { ok: ElicitResult } | { problem: string } {
  if (answer.action !== 'accept') return { ok: { action: answer.action } }
  const content = answer.content ?? {}
  const kept: Record<string, ElicitValue> = {}
  for (const name of form.required ?? []) {
    if (content[name] === undefined) return { problem: `/content/${name} is required` }
  }
  for (const [name, field] of Object.entries(form.properties)) {
    const value = content[name]
    if (value === undefined) continue
    const problem = fieldProblem(field, value)
    if (problem !== null) return { problem: `/content/${name} ${problem}` }
    kept[name] = value
  }
  return { ok: { action: 'accept', content: kept } }
}

function fieldProblem(field: FormField, value: ElicitValue): string | null {
  switch (field.type) {
    case 'string': {
      if (typeof value !== 'string') return 'must be a string'
      const allowed = field.enum ?? field.oneOf?.map((o) => o.const)
      if (allowed && !allowed.includes(value)) return `must be one of ${allowed.join(', ')}`
      if (field.minLength !== undefined && value.length < field.minLength) return `must be at least ${field.minLength} characters`
      if (field.maxLength !== undefined && value.length > field.maxLength) return `must be at most ${field.maxLength} characters`
      return null
    }
    case 'number':
    case 'integer':
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number'
      if (field.type === 'integer' && !Number.isInteger(value)) return 'must be an integer'
      if (field.minimum !== undefined && value < field.minimum) return `must be >= ${field.minimum}`
      if (field.maximum !== undefined && value > field.maximum) return `must be <= ${field.maximum}`
      return null
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be a boolean'
    case 'array': {
      if (!Array.isArray(value)) return 'must be an array of strings'
      const allowed = field.items.enum ?? field.items.anyOf?.map((o) => o.const)
      if (allowed && value.some((v) => !allowed.includes(v))) return `must hold only ${allowed.join(', ')}`
      if (field.minItems !== undefined && value.length < field.minItems) return `must hold at least ${field.minItems} items`
      if (field.maxItems !== undefined && value.length > field.maxItems) return `must hold at most ${field.maxItems} items`
      return null
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
