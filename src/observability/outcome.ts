import type { FastifyInstance } from 'fastify'
import { catalog } from '../errors/catalog.js'
import type { MessageDone } from '../rpc/observer.js'
import type { JsonRpcErrorObject } from '../rpc/types.js'

/**
 * How a JSON-RPC request ended, in words bounded enough for metric labels and span attributes: the method and tool
 * only when the server knows them (a client can send any string), error codes only from the catalog. Nothing here
 * reads argument values or results beyond a tool error's own code.
 */

export type Outcome = 'ok' | 'tool_error' | 'input_required' | 'error' | 'cancelled'

export interface Ended {
  outcome: Outcome
  /** The catalog code of an error or a tool error (`other` when it has none); '' otherwise. */
  code: string
  /** The JSON-RPC error code answered, when the answer was a JSON-RPC error. */
  rpcCode: number | null
}

const STANDARD_CODES: Readonly<Record<number, string>> = {
  [-32700]: 'PARSE_ERROR',
  [-32600]: 'INVALID_REQUEST',
  [-32601]: 'METHOD_NOT_FOUND',
  [-32602]: 'INVALID_PARAMS',
  [-32603]: 'INTERNAL_ERROR',
}

function isCatalogCode(value: unknown): value is string {
  return typeof value === 'string' && Object.hasOwn(catalog, value)
}

/** The catalog code of a JSON-RPC error this server rendered (`data.code`), else the standard code's name. */
function codeOfRpcError(error: JsonRpcErrorObject): string {
  const data = error.data as { code?: unknown } | undefined
  if (isCatalogCode(data?.code)) return data.code
  return STANDARD_CODES[error.code] ?? 'other'
}

/** A tool error's code: the catalog renders it as the JSON `{code, message}` of the first text block. */
function codeOfToolError(result: Record<string, unknown>): string {
  const first = (result.content as Array<{ type?: unknown; text?: unknown }> | undefined)?.[0]
  if (first?.type !== 'text' || typeof first.text !== 'string' || !first.text.startsWith('{')) return 'other'
  try {
    const code = (JSON.parse(first.text) as { code?: unknown }).code
    return isCatalogCode(code) ? code : 'other'
  } catch {
    return 'other'
  }
}

export function endedOf(done: MessageDone): Ended {
  if (done.failure) return { outcome: 'error', code: done.failure.code, rpcCode: null }
  const response = done.response
  if (response === null) return { outcome: 'cancelled', code: '', rpcCode: null }
  if (response.error) return { outcome: 'error', code: codeOfRpcError(response.error), rpcCode: response.error.code }
  const result = response.result ?? {}
  if (result.resultType === 'input_required') return { outcome: 'input_required', code: '', rpcCode: null }
  if (result.isError === true && done.message.method === 'tools/call') return { outcome: 'tool_error', code: codeOfToolError(result), rpcCode: null }
  return { outcome: 'ok', code: '', rpcCode: null }
}

/** Names the server knows, for labels: registered methods, tools and prompts; anything else is `null`. */
export class KnownNames {
  constructor(private readonly fastify: FastifyInstance) {}

  method(method: string): string | null {
    const { rpc } = this.fastify
    return rpc.definition(method, 'legacy') !== undefined || rpc.definition(method, 'modern') !== undefined ? method : null
  }

  /** The tool a tools/call names, when it is registered (at the time it is asked: tools come and go when embedded). */
  tool(done: MessageDone): string | null {
    if (done.message.method !== 'tools/call') return null
    const name = done.message.params?.name
    return typeof name === 'string' && this.fastify.tools.get(name) !== undefined ? name : null
  }

  prompt(done: MessageDone): string | null {
    if (done.message.method !== 'prompts/get') return null
    const name = done.message.params?.name
    return typeof name === 'string' && this.fastify.prompts.get(name) !== undefined ? name : null
  }
}
