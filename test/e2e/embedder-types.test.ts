// test-backends: none (the published declarations, checked by tsc; no server)
/**
 * An embedder's TypeScript project type-checks against the package's public declarations with `skipLibCheck: false`
 * and `strict`: the declarations `npm run build` emits (dist/ when it is up to date, else emitted from src) go into a
 * throwaway package, and a throwaway ESM project (module NodeNext) that depends on it compiles the embedding examples
 * of README.md and docs/ (every ```ts block importing 'service-mcp': an example that stops compiling fails here) and a
 * file that uses the typed parts of the API (ctx.repos, fail(), server.app). Drizzle's declarations do not type-check on their own, so
 * the public ones must never reach them (src/db/types.ts). A file misusing the API must fail: the check is real.
 * One tsc program holds them all, the misuse included: with library checks on, checking the declarations is most of
 * tsc's work, and a second program for the misuse alone doubled it. Its errors are told apart by file.
 */
import { execFile } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import t, { type Test } from 'tap'
import { ROOT } from '../helpers/root.js'

t.setTimeout(120_000)

const root = ROOT
const TSC = join(root, 'node_modules', 'typescript', 'bin', 'tsc')

function run(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolvePromise) => {
    execFile(process.execPath, [TSC, ...args], { cwd, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolvePromise({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, output: `${stdout}${stderr}` })
    })
  })
}

/** Every module the declarations of `entry` import, followed through relative imports: file → bare specifiers. */
function importClosure(entry: string): Map<string, string[]> {
  const seen = new Map<string, string[]>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '')
    const bare: string[] = []
    seen.set(file, bare)
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|^import\s+)["']([^"']+)["']/gm)) {
      const spec = m[1]!
      if (!spec.startsWith('.')) {
        bare.push(spec)
        continue
      }
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.d.ts'))
      if (existsSync(target)) visit(target)
    }
  }
  visit(entry)
  return seen
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`). */
function packageOf(spec: string): string {
  const parts = spec.split('/')
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
}

const STRICT_PROJECT = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    types: ['node'],
  },
}

/**
 * Uses what the README documents beyond the examples: typed repositories in a handler, `fail()` as a statement (its
 * declared `never` narrows `app`, so the line after it compiles only when fail() cannot return), and `server.app`.
 */
const EMBEDDER = `import { createServer, defineTool, builtinTools, fail, ServerStopping, SessionEnded, type ToolContext } from 'service-mcp'

export const appNames = defineTool<{ limit: number }, { names: string[] }>({
  name: 'team_app_names',
  title: 'App names',
  description: 'Names of the first apps of the organization.',
  inputSchema: { type: 'object', properties: { limit: { type: 'integer' } }, required: ['limit'] },
  outputSchema: { type: 'object', properties: { names: { type: 'array', items: { type: 'string' } } }, required: ['names'] },
  scope: 'mcp:read',
  role: 'viewer',
  async handler(args, ctx: ToolContext) {
    if (ctx.signal.reason instanceof ServerStopping || ctx.signal.reason instanceof SessionEnded) throw fail('OPERATION_CANCELLED')
    const page = await ctx.repos.apps.page(ctx.principal.organizationId, args.limit)
    const names: string[] = page.items.map((app) => app.name)
    return { names }
  },
})

export const appName = defineTool<{ id: string }, { name: string }>({
  name: 'team_app_name',
  title: 'App name',
  description: 'The name of one app.',
  inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  scope: 'mcp:read',
  role: 'viewer',
  async handler(args, ctx) {
    const app = await ctx.repos.apps.byId(ctx.principal.organizationId, args.id)
    if (!app) fail('RESOURCE_NOT_FOUND')
    return { name: app.name }
  },
})

const server = await createServer({ tools: [...builtinTools, appNames, appName] })
server.app.tools.remove('team_app_names')
server.app.tools.add(appNames)
server.app.resources.updated('service://apps/app_1', 'org_1')
const organizations: Array<{ id: string; slug: string }> = await server.app.repos.organizations.list()
console.log(organizations.length, await server.listen())
await server.close()
`

/** Misuses the API twice: a role that does not exist, and a repository method that does not exist. */
const MISUSE = `import { defineTool } from 'service-mcp'

export const wrong = defineTool<Record<string, never>, { n: number }>({
  name: 'team_wrong',
  title: 'Wrong',
  description: 'Does not compile.',
  inputSchema: { type: 'object' },
  scope: 'mcp:read',
  role: 'superuser',
  handler: (_args, ctx) => ({ n: ctx.repos.apps.countEverything() }),
})
`

interface Checked {
  /** Diagnostics of the project (the documented examples, embedder.ts and misuse.ts), and tsc's exit code. */
  checked: { code: number; output: string }
  exampleFiles: string[]
}

/**
 * The embedding examples of the documentation: every ```ts block of README.md and of the pages under docs/ that imports
 * 'service-mcp', each named after its page (`README-2.ts` is the README's second).
 */
function documentedExamples(): Array<{ file: string; code: string }> {
  const docs = readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.md')).map((p) => join('docs', p))
  return ['README.md', ...docs.sort()].flatMap((page) => {
    const blocks = [...readFileSync(join(root, page), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)
    const stem = page.replace(/\.md$/, '').replace(/[/\\]/g, '-')
    return blocks.filter((code) => code.includes("from 'service-mcp'")).map((code, i) => ({ file: `${stem}-${i + 1}.ts`, code }))
  })
}

/** The latest modification time of the files under `path` (a file: its own). */
function newestIn(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Math.max(0, ...readdirSync(path).map((name) => newestIn(join(path, name))))
}

/**
 * The package's declarations in `outDir`: those of `npm run build` (dist/, as `npm ci` leaves it) when it is newer than
 * everything they are emitted from, else emitted from src here. Emitting them is a pass over every source and the
 * declarations of its dependencies: on CI's two cores, under the suite's load, it took longer than the check itself,
 * and `npm ci` has just made the same ones.
 */
async function declarations(outDir: string): Promise<{ code: number; output: string; from: string }> {
  const built = join(root, 'dist', 'src', 'index.d.ts')
  const inputs = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((p) => join(root, p)).filter((p) => existsSync(p))
  if (existsSync(built) && Math.max(...inputs.map(newestIn)) < statSync(built).mtimeMs) {
    cpSync(join(root, 'dist', 'src'), join(outDir, 'src'), { recursive: true, filter: (from) => statSync(from).isDirectory() || from.endsWith('.d.ts') })
    return { code: 0, output: '', from: 'npm run build' }
  }
  const emitted = await run(['-p', join(root, 'tsconfig.build.json'), '--declaration', '--emitDeclarationOnly', '--noCheck', '--outDir', outDir], root)
  return { ...emitted, from: 'emitted from src' }
}

/** Builds the package's declarations, sets up the embedder project, runs tsc on it; the tests below read the results. */
async function check(t: Test): Promise<Checked> {
  const dir = mkdtempSync(join(tmpdir(), 'service-mcp-embedder-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))

  // The package as installed: its package.json, the declarations `npm run build` emits, its dependencies.
  const pkg = join(dir, 'service-mcp')
  mkdirSync(pkg)
  cpSync(join(root, 'package.json'), join(pkg, 'package.json'))
  symlinkSync(join(root, 'node_modules'), join(pkg, 'node_modules'), 'dir')
  const build = await declarations(join(pkg, 'dist'))
  t.equal(build.code, 0, `the declarations are emitted (${build.from})${build.code ? `\n${build.output}` : ''}`)

  // What the public declarations import: never Drizzle or better-sqlite3, only node: modules and dependencies.
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  const closure = importClosure(join(pkg, 'dist', 'src', 'index.d.ts'))
  const imported = new Map<string, string>()
  for (const [file, specs] of closure) for (const spec of specs) imported.set(spec, relative(join(pkg, 'dist'), file))
  const offending = [...imported].filter(([spec]) => !spec.startsWith('node:') && spec !== 'service-mcp' && !Object.hasOwn(manifest.dependencies, packageOf(spec)))
  t.strictSame(offending, [], 'every package the public declarations import is a dependency (not a devDependency)')
  const storage = [...imported].filter(([spec]) => /^(drizzle-orm|better-sqlite3)(\/|$)/.test(spec))
  t.strictSame(storage, [], 'no public declaration imports drizzle-orm or better-sqlite3')
  t.ok(closure.size > 20, `the closure was followed (${closure.size} declaration files)`)

  // The embedder: an ESM project with only the package and @types/node installed.
  const app = join(dir, 'embedder')
  mkdirSync(join(app, 'node_modules', '@types'), { recursive: true })
  symlinkSync(pkg, join(app, 'node_modules', 'service-mcp'), 'dir')
  symlinkSync(join(root, 'node_modules', '@types', 'node'), join(app, 'node_modules', '@types', 'node'), 'dir')
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'embedder', private: true, type: 'module' }))
  const examples = documentedExamples()
  // An example may import packages of its own (the tracing one imports OpenTelemetry's exporter): the embedder installs
  // them beside service-mcp, so they are linked in from this checkout, which has them as service-mcp's dependencies.
  for (const spec of new Set(examples.flatMap(({ code }) => [...code.matchAll(/from '([^'.][^']*)'/g)].map((m) => packageOf(m[1]!))))) {
    if (spec === 'service-mcp' || spec.startsWith('node:')) continue
    t.ok(Object.hasOwn(manifest.dependencies, spec), `${spec}, imported by a documented example, is a dependency of service-mcp`)
    mkdirSync(dirname(join(app, 'node_modules', spec)), { recursive: true })
    if (!existsSync(join(app, 'node_modules', spec))) symlinkSync(join(root, 'node_modules', spec), join(app, 'node_modules', spec), 'dir')
  }
  for (const { file, code } of examples) writeFileSync(join(app, file), code)
  const exampleFiles = examples.map(({ file }) => file)
  writeFileSync(join(app, 'embedder.ts'), EMBEDDER)
  writeFileSync(join(app, 'misuse.ts'), MISUSE)
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ ...STRICT_PROJECT, files: [...exampleFiles, 'embedder.ts', 'misuse.ts'] }))
  return { checked: await run(['-p', 'tsconfig.json'], app), exampleFiles }
}

/** The lines of tsc's output that report an error in `file`. */
function errorsIn(output: string, file: string): string[] {
  return output.split('\n').filter((l) => l.startsWith(`${file}(`) && /error TS\d+/.test(l))
}

/** The lines of tsc's output that report an error anywhere but in misuse.ts. */
function errorsBesideMisuse(output: string): string[] {
  return output.split('\n').filter((l) => /error TS\d+/.test(l) && !l.startsWith('misuse.ts('))
}

let checked: Promise<Checked> | undefined
const results = (t: Test) => (checked ??= check(t))

t.test('an embedder\'s strict tsc with skipLibCheck: false passes on the public declarations, and fails on a misuse', async (t) => {
  const { checked } = await results(t)
  t.strictSame(errorsIn(checked.output, 'embedder.ts'), [], 'no error in the embedder\'s file')
  t.notOk(/node_modules/.test(checked.output), `no error in any declaration file (library checks are on)${/node_modules/.test(checked.output) ? `\n${checked.output}` : ''}`)
  t.strictSame(errorsBesideMisuse(checked.output), [], `only the misuse has errors${errorsBesideMisuse(checked.output).length ? `:\n${checked.output}` : ''}`)

  t.equal(checked.code, 2, 'tsc fails on the misuse')
  const errors = errorsIn(checked.output, 'misuse.ts')
  t.ok(errors.length >= 2, `the misuse's errors (${errors.length})`)
  t.ok(errors.some((l) => /misuse\.ts\(9,3\): error TS2322: Type '"superuser"' is not assignable/.test(l)), 'the unknown role')
  t.ok(errors.some((l) => /misuse\.ts\(10,\d+\): error TS2339: Property 'countEverything' does not exist/.test(l)), 'the unknown repository method: ctx.repos is typed')
})

t.test('the embedding examples of the README and docs/ type-check as written', async (t) => {
  const { checked, exampleFiles } = await results(t)
  t.ok(exampleFiles.length >= 4, `the documented examples that import service-mcp (${exampleFiles.join(', ')})`)
  for (const file of exampleFiles) t.strictSame(errorsIn(checked.output, file), [], `no error in ${file}`)
  t.strictSame(errorsBesideMisuse(checked.output), [], 'nothing else fails to compile')
})
