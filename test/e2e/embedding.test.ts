// test-backends: sqlite-only (embedders in child processes, on SQLite files they make)
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { cleanEnv } from '../helpers/cli.js'
import { answerOf, modernCall } from '../helpers/modern.js'
import { CHILD_LOADER, ROOT, SERVER_ENTRY } from '../helpers/root.js'

/**
 * Embedding as the README shows it (issue 12): createServer without onBootstrap prints the first-start credentials as
 * the command line does (once it listens); an embedder's onBootstrap gets them instead; closeOnSignals stops the server
 * cleanly on SIGTERM and SIGINT (exit code 0), and its disposer removes the handlers again.
 */

t.setTimeout(120_000)


const SCRIPT = `
import { createServer } from ${JSON.stringify(SERVER_ENTRY)}
const mode = process.argv[2]
const server = await createServer({
  logger: false,
  ...(mode === 'custom' ? { onBootstrap: (r) => process.stdout.write('CUSTOM ' + JSON.stringify({ email: r.email, key: Boolean(r.generatedApiKey) }) + '\\n') } : {}),
})
const url = await server.listen()
const dispose = server.closeOnSignals()
if (mode === 'disposed') dispose()
process.stdout.write('LISTENING ' + url + '\\n')
`

interface Embedded {
  child: ChildProcess
  url: string
  stdout: () => string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

function embed(t: Test, script: string, mode: string, env: Record<string, string>): Promise<Embedded> {
  const child = spawn(process.execPath, [...CHILD_LOADER, script, mode], { cwd: ROOT, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => void child.kill('SIGKILL'))
  let out = ''
  let err = ''
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the embedding did not listen in 30 s\n${out}\n${err}`)), 30_000)
    child.stderr!.on('data', (d) => (err += d))
    child.stdout!.on('data', (d) => {
      out += d
      const url = /^LISTENING (\S+)$/m.exec(out)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve({ child, url, stdout: () => out, exited })
      }
    })
    void exited.then(({ code }) => {
      clearTimeout(timer)
      reject(new Error(`the embedding exited with ${code} before listening\n${out}\n${err}`))
    })
  })
}

async function stopWith(t: Test, embedded: Embedded, signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  embedded.child.kill(signal)
  const killer = setTimeout(() => embedded.child.kill('SIGKILL'), 15_000)
  const result = await embedded.exited
  clearTimeout(killer)
  return result
}

t.test('the default onBootstrap prints the first-start block; closeOnSignals stops cleanly', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-embed-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const script = join(dir, 'embed.mjs')
  writeFileSync(script, SCRIPT)
  const env = { SERVICE_DATABASE: join(dir, 'service.db'), SERVICE_PORT: '0' }

  const first = await embed(t, script, 'default', env)
  const out = first.stdout()
  t.match(out, /^First start: created organization "default" with an owner account\.\n {2}email: {4}owner@example\.com\n {2}password: \S{16,}\n {2}API key: {2}service_mcp_\S+\nThese are shown once\. Store them now\.\nLISTENING /, 'the same block as the command line, on stdout, once listening')
  const key = /API key: {2}(\S+)/.exec(out)![1]!
  const whoami = answerOf(await modernCall(`${first.url}/mcp`, key, 'service_whoami', {}, { id: 'w' }), 'w')
  t.equal(whoami?.result?.isError, false, 'the printed key works')
  t.same(await stopWith(t, first, 'SIGTERM'), { code: 0, signal: null }, 'SIGTERM: a clean stop, exit code 0')

  const second = await embed(t, script, 'default', env)
  t.match(second.stdout(), /^LISTENING /, 'nothing printed on a database that has an owner')
  t.same(await stopWith(t, second, 'SIGINT'), { code: 0, signal: null }, 'SIGINT: the same')

  const custom = await embed(t, script, 'custom', { ...env, SERVICE_DATABASE: join(dir, 'custom.db') })
  t.match(custom.stdout(), /^CUSTOM {"email":"owner@example\.com","key":true}\nLISTENING /, 'an embedder\'s onBootstrap gets the result; nothing else is printed')

  const disposed = await embed(t, script, 'disposed', { ...env, SERVICE_DATABASE: join(dir, 'disposed.db') })
  t.same(await stopWith(t, disposed, 'SIGTERM'), { code: null, signal: 'SIGTERM' }, 'after the disposer, SIGTERM is Node\'s default again')
  t.same(await stopWith(t, custom, 'SIGTERM'), { code: 0, signal: null })
})
