/**
 * The three servers of `npm run bench -- --compare` as the load generator sees them: how each is started (its own
 * process, pinned to one core when asked; the bare one with the project's service_apps_list result), how a request to
 * it looks (headers of a session, of a stateless call), how its answers are read (JSON, or SSE for the SDK) and
 * checked, and the probe that asserts they all answer the same tools/call result. Importing this module runs nothing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { Pool } from 'undici'
import { ACCEPT, initHeaders, initializeBody, MODERN_META, modernHeaders, openSession, PROTOCOL, RAISED_LIMITS, ROOT, startServerChild, type ServerChild } from '../child.js'
import { APPS_TOOL_NAME, BARE_APPS_RESULT_ENV, FIXED_RESULT, FIXED_TOOL_NAME, fixedCallBody, SEEDED_APPS } from './fixed.js'

export const SERVER_KINDS = ['project', 'sdk', 'bare'] as const
export type ServerKind = (typeof SERVER_KINDS)[number]

const PROGRAMS: Record<ServerKind, string> = {
  project: join(ROOT, 'scripts', 'bench', 'compare', 'server-project.ts'),
  sdk: join(ROOT, 'scripts', 'bench', 'compare', 'server-sdk.ts'),
  bare: join(ROOT, 'scripts', 'bench', 'compare', 'server-bare.ts'),
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return '?'
  }
}

/** How the servers are named in the output (the rows). */
export const SERVER_LABELS: Record<ServerKind, string> = {
  sdk: `official SDK ${packageVersion('@modelcontextprotocol/sdk')} McpServer + StreamableHTTPServerTransport, stateful SSE`,
  bare: `bare Fastify ${packageVersion('fastify')} route answering a precomputed body`,
  project: 'this project',
}

export interface CompareServerOptions {
  /** The core to run the server on (`taskset -c <core>`); null: unpinned. */
  core: number | null
  /** Preload scripts/bench/probe.mjs (heap after a forced GC over IPC): the memory scenario's servers. */
  probe: boolean
  /** The project's server from the build (what `npm start` runs) or from src/ through tsx (the harness's test). */
  projectEntry?: 'dist' | 'src'
  /**
   * The bare server only: the project's service_apps_list `result`, as the project wrote it (projectAppsResult), for
   * the bare server to answer that tool with the same bytes. Without it, the bare server does not serve that tool.
   */
  appsResult?: string
}

/** Starts one server program as its own child process on 127.0.0.1, and resolves once /mcp answers over HTTP. */
export async function startCompareServer(kind: ServerKind, options: CompareServerOptions): Promise<ServerChild> {
  const env: Record<string, string> = {}
  // The bootstrap API key, SQLite in a temporary directory, log level warn and NODE_ENV=production come from the
  // helper's base environment; only the project reads them.
  if (kind === 'project') Object.assign(env, RAISED_LIMITS, { COMPARE_PROJECT_ENTRY: options.projectEntry ?? 'dist' })
  // The bare server reads the file before it listens: it is removed as soon as the server answers (or fails to start).
  const dir = kind === 'bare' && options.appsResult !== undefined ? mkdtempSync(join(tmpdir(), 'service-mcp-bench-apps-')) : null
  if (dir !== null) {
    const file = join(dir, 'apps-result.json')
    writeFileSync(file, options.appsResult!)
    env[BARE_APPS_RESULT_ENV] = file
  }
  try {
    return await startServerChild({
      entry: PROGRAMS[kind],
      probe: options.probe,
      ...(options.core !== null ? { prefix: ['taskset', '-c', String(options.core)] } : {}),
      env,
    })
  } finally {
    if (dir !== null) rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Requests

/** The headers of an initialize request: the project wants its API key; the SDK's and the bare server want none. */
export function initHeadersOf(kind: ServerKind): Record<string, string> {
  return kind === 'project' ? initHeaders() : { 'content-type': 'application/json', accept: ACCEPT }
}

/** The headers of a stateless (2026-07-28) tools/call of `tool` on the project. */
export function statelessHeaders(tool: string): Record<string, string> {
  return modernHeaders(initHeaders(), 'tools/call', tool)
}

/** A tools/call of `tool` without arguments, with a JSON-RPC id; stateless: with the 2026-07-28 `_meta`. */
export function callBody(tool: string, id: number | string, stateless = false): string {
  return tool === FIXED_TOOL_NAME
    ? fixedCallBody(id, stateless ? MODERN_META : '')
    : `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call","params":{"name":"${tool}","arguments":{}${stateless ? ',' + MODERN_META : ''}}}`
}

export { initializeBody, openSession }

// ---------------------------------------------------------------------------------------------------------------
// Answers

/**
 * The JSON-RPC message of an answer: the body of a JSON answer, or the `data` of the first `message` event of an SSE
 * answer (the SDK answers every POST on its own SSE stream; no priming event without an event store). Null when
 * there is none. String work only: the load generator checks every answer with it.
 */
export function messageOf(contentType: string | string[] | undefined, text: string): string | null {
  const type = Array.isArray(contentType) ? contentType[0] : contentType
  if (type === undefined || !type.startsWith('text/event-stream')) return text
  // One event per answer: `event: message\ndata: {…}\n\n` (a data line may also come first, without an event name).
  const at = text.startsWith('data: ') ? 0 : text.indexOf('\ndata: ') + 1
  if (at === 0 && !text.startsWith('data: ')) return null
  const end = text.indexOf('\n', at + 6)
  return text.slice(at + 6, end === -1 ? undefined : end)
}

export interface ProbeAnswer {
  status: number
  contentType: string
  /** Bytes of the HTTP body (for the SDK: with its SSE framing). */
  bodyBytes: number
  /** Bytes of the JSON-RPC message itself. */
  messageBytes: number
  /** The JSON-RPC message as the server wrote it (for the SDK: the data of its SSE event). */
  raw: string
  message: { jsonrpc?: string; id?: unknown; result?: Record<string, unknown>; error?: unknown }
  sessionId?: string
}

/** One POST to /mcp, its answer read completely and parsed (probes only, never under load). */
export async function post(pool: Pool, headers: Record<string, string>, body: string): Promise<ProbeAnswer> {
  const res = await pool.request({ path: '/mcp', method: 'POST', headers, body })
  const text = await res.body.text()
  const contentType = String(res.headers['content-type'] ?? '')
  const message = messageOf(contentType, text)
  let parsed: ProbeAnswer['message']
  try {
    parsed = JSON.parse(message ?? 'null') as ProbeAnswer['message']
  } catch {
    throw new Error(`not a JSON-RPC answer (HTTP ${res.statusCode}, ${contentType}): ${text.slice(0, 300)}`)
  }
  const sessionId = res.headers['mcp-session-id']
  return {
    status: res.statusCode,
    contentType,
    bodyBytes: Buffer.byteLength(text),
    messageBytes: Buffer.byteLength(message ?? ''),
    raw: message ?? '',
    message: parsed ?? {},
    ...(typeof sessionId === 'string' ? { sessionId } : {}),
  }
}

/**
 * The `result` of an answer as its server wrote it: the bytes between `{"jsonrpc":"2.0","id":<id>,"result":` and the
 * final `}`. Should a server write its envelope otherwise (another key order, spaces), the result re-serialized.
 */
export function resultText(answer: ProbeAnswer): string {
  const prefix = `{"jsonrpc":"2.0","id":${JSON.stringify(answer.message.id)},"result":`
  if (answer.raw.startsWith(prefix) && answer.raw.endsWith('}')) {
    const text = answer.raw.slice(prefix.length, -1)
    try {
      if (isDeepStrictEqual(JSON.parse(text), answer.message.result)) return text
    } catch {
      // not the result alone: re-serialized below
    }
  }
  return JSON.stringify(answer.message.result)
}

/**
 * The project's service_apps_list `result` on a 2025-11-25 session (no resultType, no `_meta`), as the project wrote
 * it: what the bare server is started with (CompareServerOptions.appsResult), so that it answers the same bytes.
 */
export async function projectAppsResult(project: ServerChild): Promise<string> {
  const pool = new Pool(project.origin, { connections: 1 })
  try {
    const session = await openSession(pool, initHeadersOf('project'))
    const answer = await post(pool, session, callBody(APPS_TOOL_NAME, PROBE_ID))
    const apps = (answer.message.result?.structuredContent as { apps?: unknown[] } | undefined)?.apps
    if (answer.status !== 200 || answer.message.id !== PROBE_ID || !answer.message.result || answer.message.result.isError !== false || apps?.length !== SEEDED_APPS) {
      throw new Error(`project: tools/call ${APPS_TOOL_NAME} failed: HTTP ${answer.status} ${answer.raw.slice(0, 300)}`)
    }
    await closeSessions(project.origin, 'project', [session['mcp-session-id']!])
    return resultText(answer)
  } finally {
    await pool.close()
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The probe

/** What a server answers to one tools/call, for the probe's report. */
export interface CallProbe {
  server: ServerKind
  path: string
  tool: string
  /** Bytes of the JSON-RPC answer. */
  messageBytes: number
  /** Bytes of the HTTP body (differs from messageBytes on SSE). */
  bodyBytes: number
  contentType: string
}

export interface ProbeReport {
  calls: CallProbe[]
  /** The tools/call `result` of the fixed tool, as every server answered it (they are deep-equal). */
  result: Record<string, unknown>
  /** The service_apps_list `result` of the project on a session, which the bare server answered too (deep-equal, same bytes). */
  appsResult?: Record<string, unknown>
  /** Bytes of each server's initialize answer (the JSON-RPC message). */
  initializeBytes: Record<ServerKind, number>
}

/** The probe's JSON-RPC id: ten digits, like every id of the load generator (its answers are as long as the probe's). */
export const PROBE_ID = 1_000_000_000

/**
 * Asserts that the servers answer initialize, and the same tools/call `result` for the fixed tool (deep-equal; the
 * project's stateless answer is the same result with `resultType: "complete"` and its `_meta`), that the project's
 * service_apps_list returns the seeded page on a session and stateless, and, when the project is probed too, that the
 * bare server answers service_apps_list with the project's session result (deep-equal and as many bytes: it must have
 * been started with it, CompareServerOptions.appsResult). Throws on any difference; returns the sizes.
 */
export async function probeServers(servers: Partial<Record<ServerKind, ServerChild>>): Promise<ProbeReport> {
  const calls: CallProbe[] = []
  const results: Array<[string, unknown]> = []
  const initializeBytes = {} as Record<ServerKind, number>
  let appsResult: Record<string, unknown> | undefined
  let appsBytes = 0
  for (const kind of SERVER_KINDS) {
    const server = servers[kind]
    if (!server) continue
    const pool = new Pool(server.origin, { connections: 1 })
    try {
      const init = await post(pool, initHeadersOf(kind), initializeBody(PROBE_ID))
      if (init.status !== 200 || !init.sessionId || typeof init.message.result?.protocolVersion !== 'string') {
        throw new Error(`${kind}: initialize failed: HTTP ${init.status} ${JSON.stringify(init.message).slice(0, 300)}`)
      }
      initializeBytes[kind] = init.messageBytes
      const session = await openSession(pool, initHeadersOf(kind))
      const call = async (path: string, headers: Record<string, string>, tool: string, stateless: boolean) => {
        const answer = await post(pool, headers, callBody(tool, PROBE_ID, stateless))
        if (answer.status !== 200 || answer.message.id !== PROBE_ID || !answer.message.result) {
          throw new Error(`${kind} (${path}): tools/call ${tool} failed: HTTP ${answer.status} ${JSON.stringify(answer.message).slice(0, 300)}`)
        }
        calls.push({ server: kind, path, tool, messageBytes: answer.messageBytes, bodyBytes: answer.bodyBytes, contentType: answer.contentType })
        if (tool === APPS_TOOL_NAME && kind === 'project' && path === 'session') {
          appsResult = answer.message.result
          appsBytes = answer.messageBytes
        }
        return answer.message.result
      }
      results.push([`${kind} (session)`, await call('session', session, FIXED_TOOL_NAME, false)])
      if (kind === 'project') {
        // A 2026-07-28 answer also says it is complete and names the server (`_meta`): the same result besides.
        const { resultType, _meta, ...rest } = await call('stateless', statelessHeaders(FIXED_TOOL_NAME), FIXED_TOOL_NAME, true)
        if (resultType !== 'complete') throw new Error(`project (stateless): resultType ${String(resultType)}, expected complete`)
        results.push(['project (stateless)', rest])
        for (const [path, headers, stateless] of [['session', session, false], ['stateless', statelessHeaders(APPS_TOOL_NAME), true]] as const) {
          const apps = (await call(path, headers, APPS_TOOL_NAME, stateless)).structuredContent as { apps?: unknown[] } | undefined
          if (apps?.apps?.length !== SEEDED_APPS) throw new Error(`project (${path}): service_apps_list returned ${apps?.apps?.length} apps, expected ${SEEDED_APPS}`)
        }
      }
      if (kind === 'bare' && appsResult) {
        // The floor of the apps scenario: the project's own session result, byte for byte (only the id spliced in).
        const bare = await call('session', session, APPS_TOOL_NAME, false)
        const bareBytes = calls[calls.length - 1]!.messageBytes
        if (!isDeepStrictEqual(bare, appsResult) || bareBytes !== appsBytes) {
          throw new Error(
            `bare answers a different service_apps_list result than the project (${bareBytes} B, the project's ${appsBytes} B; was it started with the project's result?):\n` +
              `${JSON.stringify(bare).slice(0, 600)}\nexpected:\n${JSON.stringify(appsResult).slice(0, 600)}`,
          )
        }
      }
    } finally {
      await pool.close()
    }
  }
  for (const [who, result] of results) {
    if (!isDeepStrictEqual(result, FIXED_RESULT)) {
      throw new Error(`${who} answers a different tools/call result:\n${JSON.stringify(result).slice(0, 600)}\nexpected:\n${JSON.stringify(FIXED_RESULT).slice(0, 600)}`)
    }
  }
  return { calls, result: FIXED_RESULT, initializeBytes, ...(appsResult ? { appsResult } : {}) }
}

// ---------------------------------------------------------------------------------------------------------------
// Cleaning up

/**
 * Ends sessions with DELETE /mcp, 16 at a time (the init scenario's, between measurements: the servers keep every
 * session they open). Returns how many were not answered 200/204.
 */
export async function closeSessions(origin: string, kind: ServerKind, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0
  const pool = new Pool(origin, { connections: 16, pipelining: 1 })
  const base = { ...initHeadersOf(kind), 'mcp-protocol-version': PROTOCOL }
  let next = 0
  let failed = 0
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++]!
      try {
        const res = await pool.request({ path: '/mcp', method: 'DELETE', headers: { ...base, 'mcp-session-id': id } })
        await res.body.dump()
        if (res.statusCode !== 200 && res.statusCode !== 204) failed++
      } catch {
        failed++
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(16, ids.length) }, worker))
  } finally {
    await pool.close()
  }
  return failed
}
