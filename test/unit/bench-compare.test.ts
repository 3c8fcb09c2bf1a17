import t from 'tap'
import { Pool } from 'undici'
import type { ServerChild } from '../../scripts/bench/child.js'
import { APPS_TOOL_NAME, FIXED_OUTPUT, FIXED_RESULT, FIXED_TOOL_NAME, SEEDED_APPS } from '../../scripts/bench/compare/fixed.js'
import { parseCompareOptions } from '../../scripts/bench/compare/options.js'
import {
  callBody,
  closeSessions,
  initHeadersOf,
  messageOf,
  openSession,
  post,
  probeServers,
  projectAppsResult,
  resultText,
  SERVER_KINDS,
  startCompareServer,
  type ServerKind,
} from '../../scripts/bench/compare/servers.js'

/**
 * What keeps `npm run bench -- --compare` from rotting, without timing anything: its three server programs start (no
 * taskset; the project's from src/ through tsx, as the tests run without a build), answer initialize, and answer the
 * same tools/call result of about 2.7 KB (the harness's own probe, which throws on any difference); the bare server
 * answering service_apps_list with the project's own result when started with it, and not serving it otherwise; the
 * load generator's reading of an SSE answer; closing sessions; and the parsing of the mode's options.
 */

t.setTimeout(60_000)

t.test('the options: defaults, and every bad value is refused naming its flag', async (t) => {
  const defaults = parseCompareOptions(['--compare'], {})
  t.equal(defaults.durationMs, 5000)
  t.equal(defaults.warmupMs, 1000)
  t.same(defaults.concurrency, [16])
  t.equal(defaults.rounds, 3)
  t.equal(defaults.sessions, 2000)
  t.same([...defaults.scenarios], ['call', 'apps', 'init', 'memory'])
  t.equal(defaults.pin, 'auto')
  t.equal(defaults.json, '')

  const set = parseCompareOptions(['--compare', '--duration', '0.5', '--warmup', '0', '--rounds', '1', '--concurrency', '1,16', '--sessions', '10', '--scenarios', 'init,call', '--pin', 'off', '--json', '/tmp/x.json'], {})
  t.same({ d: set.durationMs, w: set.warmupMs, c: set.concurrency, r: set.rounds, s: set.sessions, sc: [...set.scenarios], p: set.pin, j: set.json }, { d: 500, w: 0, c: [1, 16], r: 1, s: 10, sc: ['init', 'call'], p: 'off', j: '/tmp/x.json' })
  t.equal(parseCompareOptions(['--compare'], { BENCH_ROUNDS: '5' }).rounds, 5, 'BENCH_<NAME> from the environment')
  t.equal(parseCompareOptions(['--compare', '--rounds', '2'], { BENCH_ROUNDS: '5' }).rounds, 2, 'the flag before the environment')

  const bad: Array<[string[], RegExp]> = [
    [['--rounds', '0'], /--rounds must be a positive integer/],
    [['--rounds', '1.5'], /--rounds must be a positive integer/],
    [['--rounds', 'three'], /--rounds must be a positive integer/],
    [['--duration', '0'], /--duration must be a positive number/],
    [['--duration=-1'], /--duration must be a positive number/],
    [['--warmup=-1'], /--warmup must be a non-negative number/],
    [['--concurrency', '16,0'], /--concurrency must be a positive integer/],
    [['--concurrency', '16,x'], /--concurrency must be a positive integer/],
    [['--concurrency', '16,16'], /--concurrency lists a value twice/],
    [['--sessions', '0'], /--sessions must be a positive integer/],
    [['--scenarios', 'call,ping'], /unknown scenario ping/],
    [['--pin', 'yes'], /--pin must be auto or off/],
    [['--nope'], /Unknown option '--nope'/],
    [['--rounds'], /--rounds/],
    [['positional'], /positional/],
  ]
  for (const [args, message] of bad) t.throws(() => parseCompareOptions(['--compare', ...args], {}), message, args.join(' '))
  t.throws(() => parseCompareOptions(['--compare'], { BENCH_ROUNDS: '0' }), /--rounds must be a positive integer/, 'a bad BENCH_ value too')
})

t.test('an SSE answer is read as the JSON-RPC message of its event', async (t) => {
  t.equal(messageOf('text/event-stream', 'event: message\ndata: {"id":1}\n\n'), '{"id":1}')
  t.equal(messageOf('text/event-stream', 'data: {"id":2}\n\n'), '{"id":2}')
  t.equal(messageOf('text/event-stream', 'event: message\n\n'), null)
  t.equal(messageOf('application/json; charset=utf-8', '{"id":3}'), '{"id":3}')
})

t.test('the result of an answer is read as its server wrote it', async (t) => {
  const answer = (raw: string) => ({ status: 200, contentType: 'application/json', bodyBytes: raw.length, messageBytes: raw.length, raw, message: JSON.parse(raw) as { id: unknown; result: Record<string, unknown> } })
  t.equal(resultText(answer('{"jsonrpc":"2.0","id":1,"result":{"b":1,"a":"\\u00e9"}}')), '{"b":1,"a":"\\u00e9"}', 'the bytes between the envelope and its last brace')
  t.equal(resultText(answer('{"jsonrpc":"2.0","result":{"b":1},"id":1}')), '{"b":1}', 'another envelope: re-serialized')
})

t.test('the three servers answer initialize and the same tools/call result of about 2.7 KB', async (t) => {
  // As the harness does: the project and the SDK first, then the bare server with the project's apps result.
  const stops: Array<() => Promise<unknown>> = []
  t.teardown(() => Promise.all(stops.map((stop) => stop())))
  const first = await Promise.allSettled((['project', 'sdk'] as const).map((kind) => startCompareServer(kind, { core: null, probe: false, projectEntry: 'src' })))
  for (const s of first) if (s.status === 'fulfilled') stops.push(s.value.stop)
  for (const s of first) if (s.status === 'rejected') throw s.reason
  const [project, sdk] = first.map((s) => (s as PromiseFulfilledResult<ServerChild>).value) as [ServerChild, ServerChild]
  const appsResult = await projectAppsResult(project)
  const bare = await startCompareServer('bare', { core: null, probe: false, appsResult })
  stops.push(bare.stop)
  const servers: Record<ServerKind, ServerChild> = { project, sdk, bare }

  const probe = await probeServers(servers)
  t.same(probe.result, FIXED_RESULT, 'the result every server answered (deep-equal, or the probe throws)')
  t.same(JSON.parse((FIXED_RESULT.content[0] as { text: string }).text), FIXED_OUTPUT, 'the text is the structured output')
  for (const kind of SERVER_KINDS) {
    const fixed = probe.calls.find((c) => c.server === kind && c.path === 'session' && c.tool === FIXED_TOOL_NAME)
    t.ok(fixed && fixed.messageBytes >= 2600 && fixed.messageBytes <= 2800, `${kind}: the complete tools/call answer is ${fixed?.messageBytes} bytes`)
    t.ok(probe.initializeBytes[kind] > 0, `${kind}: initialize answered`)
  }
  t.match(probe.calls.find((c) => c.server === 'sdk')?.contentType, /^text\/event-stream/, 'the SDK answers on SSE')
  t.ok(probe.calls.some((c) => c.server === 'project' && c.path === 'stateless' && c.tool === APPS_TOOL_NAME), 'the project serves its 20 apps stateless too')

  // The bare server's service_apps_list: the project's result, byte for byte, with the request's id.
  t.same(JSON.parse(appsResult), probe.appsResult, 'the result the bare server was started with is the project\'s session result')
  const appsOf = (kind: ServerKind) => probe.calls.find((c) => c.server === kind && c.path === 'session' && c.tool === APPS_TOOL_NAME)
  t.ok(appsOf('bare') && appsOf('bare')!.messageBytes === appsOf('project')!.messageBytes, `bare and project answer service_apps_list in as many bytes (${appsOf('bare')?.messageBytes})`)
  t.ok(appsOf('bare')!.messageBytes >= 7000 && appsOf('bare')!.messageBytes <= 10000, 'an answer of about 8.5 KB')
  const pools = { project: new Pool(project.origin, { connections: 1 }), bare: new Pool(bare.origin, { connections: 1 }) }
  try {
    const projectAnswer = await post(pools.project, await openSession(pools.project, initHeadersOf('project')), callBody(APPS_TOOL_NAME, 'req-8'))
    const bareAnswer = await post(pools.bare, initHeadersOf('bare'), callBody(APPS_TOOL_NAME, 'req-8'))
    t.equal(bareAnswer.raw, projectAnswer.raw, 'the same JSON-RPC answer, byte for byte (a string id too)')
    t.equal((bareAnswer.message.result?.structuredContent as { apps: unknown[] }).apps.length, SEEDED_APPS)
  } finally {
    await Promise.all([pools.project.close(), pools.bare.close()])
  }

  // The same answer under the load generator's framing: a session of each, one call, the message of the answer.
  for (const kind of SERVER_KINDS) {
    const pool = new Pool(servers[kind].origin, { connections: 1 })
    try {
      const headers = await openSession(pool, initHeadersOf(kind))
      const answer = await post(pool, headers, callBody(FIXED_TOOL_NAME, 7))
      t.same(answer.message, { jsonrpc: '2.0', id: 7, result: FIXED_RESULT }, `${kind}: the JSON-RPC answer`)
      if (kind !== 'bare') t.equal(await closeSessions(servers[kind].origin, kind, [headers['mcp-session-id']!]), 0, `${kind}: the session closes with DELETE`)
    } finally {
      await pool.close()
    }
  }
})

t.test('without the apps file, the bare server does not serve service_apps_list', async (t) => {
  const bare = await startCompareServer('bare', { core: null, probe: false })
  t.teardown(() => bare.stop())
  const pool = new Pool(bare.origin, { connections: 1 })
  t.teardown(() => pool.close())
  const apps = await post(pool, initHeadersOf('bare'), callBody(APPS_TOOL_NAME, 3))
  t.equal(apps.status, 200)
  t.same(apps.message, { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Unknown tool' } }, 'an unknown tool')
  const fixed = await post(pool, initHeadersOf('bare'), callBody(FIXED_TOOL_NAME, 4))
  t.same(fixed.message, { jsonrpc: '2.0', id: 4, result: FIXED_RESULT }, 'the fixed tool still is')
  t.equal((await probeServers({ bare })).appsResult, undefined, 'without the project, the probe does not ask the bare server for apps')
})
