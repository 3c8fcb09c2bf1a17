import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { postgresPassFiles } from '../../scripts/postgres-pass.js'

function tree(t: { teardown(fn: () => void): void }, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'pg-pass-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  for (const folder of ['test/e2e', 'test/http', 'test/regressions', 'test/unit']) mkdirSync(join(root, folder), { recursive: true })
  for (const [file, text] of Object.entries(files)) writeFileSync(join(root, file), text)
  return root
}

t.test('files run on PostgreSQL unless they declare why not', async (t) => {
  const root = tree(t, {
    'test/e2e/a.test.ts': "import t from 'tap'\n",
    'test/e2e/b.test.ts': "// test-backends: sqlite-only (its own files)\nimport t from 'tap'\n",
    'test/http/c.test.ts': "// test-backends: own (PostgreSQL itself)\n",
    'test/regressions/d.test.ts': "// test-backends: none (no server)\n",
    'test/e2e/helper.ts': '// not a test file\n',
    'test/unit/pure.test.ts': "import t from 'tap'\n",
    'test/unit/repos.test.ts': "// test-backends: both (repositories)\n",
  })
  const { run, leftOut } = postgresPassFiles(root)
  t.same(run, ['test/e2e/a.test.ts', 'test/unit/repos.test.ts'], 'unit tests only when they say so')
  t.same(leftOut, [
    { file: 'test/e2e/b.test.ts', kind: 'sqlite-only', reason: 'its own files' },
    { file: 'test/http/c.test.ts', kind: 'own', reason: 'PostgreSQL itself' },
    { file: 'test/regressions/d.test.ts', kind: 'none', reason: 'no server' },
  ])
})

t.test('a misspelt declaration stops the pass instead of changing what runs', async (t) => {
  t.throws(() => postgresPassFiles(tree(t, { 'test/e2e/a.test.ts': '// test-backends: sqlite (no reason given)\n' })), /a\.test\.ts: a test-backends line must read/)
  t.throws(() => postgresPassFiles(tree(t, { 'test/e2e/a.test.ts': '// test-backends: own\n' })), /must read/)
})

t.test('the repository itself: every declaration reads right, and the pass keeps most files', async (t) => {
  const { run, leftOut } = postgresPassFiles()
  // Most files reach storage through a server and belong in the pass; the ones left out (browsers, proxies, processes
  // of their own, in-memory apps) stay a minority: more than two files in three run on PostgreSQL.
  t.ok(run.length * 3 > (run.length + leftOut.length) * 2, `${run.length} files run, ${leftOut.length} left out`)
  t.ok(run.includes('test/e2e/resume.test.ts'), 'a file that reaches storage through a server is in the pass')
})
