/**
 * The shape of src/ that docs/decisions/architecture.md promises, read from the source itself (TypeScript's parser):
 * the run-time import graph (imports of values; `import type` and type-only names erase at compile time), its cycles,
 * the imports that go up the layers, and the MCP method names that a file names in a string.
 *
 *   npx tsx scripts/import-graph.ts      prints cycles, upward imports and the folders' run-time edges
 *
 * test/unit/architecture.test.ts holds the promises: no cycle, nothing in rpc/ imports sessions/, no file of the
 * transport names a method, and no more upward imports than the page lists.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { packageRoot } from '../src/lib/package-root.js'

export interface ImportGraph {
  /** File → the files it imports at run time; paths relative to src/, with .ts. */
  edges: Map<string, Set<string>>
  /** File → every file it imports, types included. */
  allEdges: Map<string, Set<string>>
}

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) sourceFiles(path, out)
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

/** Whether an import or export declaration brings in a value (else it erases). */
function importsValue(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) {
    if (node.isTypeOnly) return false
    const clause = node.exportClause
    return !(clause && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly))
  }
  const clause = node.importClause
  if (!clause) return true // import './side-effect.js'
  if (clause.isTypeOnly) return false
  if (clause.name) return true
  const bindings = clause.namedBindings
  if (!bindings) return true
  if (ts.isNamespaceImport(bindings)) return true
  return bindings.elements.length === 0 || !bindings.elements.every((e) => e.isTypeOnly)
}

export function importGraph(src = join(packageRoot(), 'src')): ImportGraph {
  const edges = new Map<string, Set<string>>()
  const allEdges = new Map<string, Set<string>>()
  for (const file of sourceFiles(src)) {
    const from = relative(src, file)
    const runtime = new Set<string>()
    const all = new Set<string>()
    const parsed = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
    for (const node of parsed.statements) {
      if (!(ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) || !node.moduleSpecifier) continue
      const spec = (node.moduleSpecifier as ts.StringLiteral).text
      if (!spec.startsWith('.')) continue
      const to = relative(src, resolve(dirname(file), spec)).replace(/\.js$/, '.ts')
      all.add(to)
      if (importsValue(node)) runtime.add(to)
    }
    edges.set(from, runtime)
    allEdges.set(from, all)
  }
  return { edges, allEdges }
}

/** The strongly connected components of more than one file (Tarjan): each is an import cycle. */
export function cycles(edges: Map<string, Set<string>>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v) ?? []) {
      if (!edges.has(w)) continue
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1) found.push(component.sort())
  }
  for (const v of edges.keys()) if (!index.has(v)) visit(v)
  return found
}

/**
 * The layers, lowest first (docs/decisions/architecture.md): a file may import its own layer and those below it. The
 * first path segment under src/ (or the file's name at the top) decides.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ['lib', 'errors', 'validation', 'generated', 'config.ts', 'version.ts'],
  ['db', 'limits', 'audit'],
  ['coordination', 'auth', 'oauth', 'identity', 'observability', 'deployments', 'retention'],
  ['rpc'],
  ['sessions', 'mcp', 'mrtr'],
  ['plugins', 'web'],
  ['app.ts', 'bootstrap.ts', 'index.ts', 'cli.ts', 'cli'],
  ['conformance'],
]

export function layerOf(file: string): number {
  const top = file.split('/')[0]!
  const at = LAYERS.findIndex((names) => names.includes(top))
  if (at < 0) throw new Error(`${file}: in no layer of scripts/import-graph.ts LAYERS`)
  return at
}

/** Run-time imports from a lower layer to a higher one, as "from -> to". */
export function upwardImports(edges: Map<string, Set<string>>): string[] {
  const up: string[] = []
  for (const [from, tos] of edges) for (const to of tos) if (edges.has(to) && layerOf(to) > layerOf(from)) up.push(`${from} -> ${to}`)
  return up.sort()
}

/** The first segments of MCP method names (`tools/call`, `notifications/cancelled`…), and the two without a slash. */
const METHOD = /^(?:(?:notifications|tools|prompts|resources|completion|logging|elicitation|sampling|roots|tasks|server|subscriptions)\/[A-Za-z/]+|initialize|ping)$/

/** The MCP method names a file writes as string literals. */
export function methodNamesIn(file: string): string[] {
  const parsed = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const names: string[] = []
  const visit = (node: ts.Node): void => {
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && METHOD.test(node.text)) names.push(node.text)
    ts.forEachChild(node, visit)
  }
  visit(parsed)
  return names
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { edges } = importGraph()
  const found = cycles(edges)
  console.log(`${edges.size} files; ${found.length} run-time import cycle(s)`)
  for (const c of found) console.log(`  cycle: ${c.join(' → ')}`)
  const up = upwardImports(edges)
  console.log(`${up.length} upward run-time import(s)`)
  for (const u of up) console.log(`  ${u}`)
}
