/**
 * Fails when committed generated files drift from their sources:
 * - src/generated/* from schemas/ (Ajv standalone validators, embedded schema documents);
 * - drizzle/ migrations from src/db/sqlite/schema.ts and drizzle/postgres/ from src/db/postgres/schema.ts (drizzle-kit
 *   generate into a scratch copy must find nothing to do);
 * - the two schemas against each other: the same tables with the same primary keys, indexes and unique constraints
 *   (schema-shape.ts; their columns' rows are compared at compile time, src/db/schema-rows.ts).
 */
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { check } from './build-validators.js'
import * as postgresSchema from '../src/db/postgres/schema.js'
import * as sqliteSchema from '../src/db/sqlite/schema.js'
import { compareShapes, postgresShape, sqliteShape } from './schema-shape.js'

const root = fileURLToPath(new URL('..', import.meta.url))
let failed = false

const drift = check()
if (drift.length) {
  console.error(`check:generated: ${drift.join(', ')} out of date; run npm run build:validators and commit`)
  failed = true
} else {
  console.log('check:generated: validators match schemas/')
}

/**
 * drizzle-kit, generating into a scratch copy of a dialect's committed migrations, must find nothing to do. SQLite's
 * live in drizzle/ (their folder since the first release), PostgreSQL's in drizzle/postgres/.
 */
function checkMigrations(dialect: 'sqlite' | 'postgresql', schema: string, folder: string): void {
  const scratch = mkdtempSync(join(tmpdir(), 'drizzle-check-'))
  try {
    cpSync(join(root, folder), scratch, { recursive: true })
    const before = readdirSync(scratch).length
    execFileSync(join(root, 'node_modules/.bin/drizzle-kit'),
      ['generate', '--dialect', dialect, '--schema', schema, '--out', scratch, '--name', 'drift'],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    const after = readdirSync(scratch).length
    if (after !== before) {
      console.error(`check:generated: ${schema} has changes without a migration; run npm run db:generate and commit ${folder}/`)
      failed = true
    } else {
      console.log(`check:generated: ${folder}/ matches ${schema}`)
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

checkMigrations('sqlite', './src/db/sqlite/schema.ts', 'drizzle')
checkMigrations('postgresql', './src/db/postgres/schema.ts', 'drizzle/postgres')

const dialectDrift = compareShapes(
  { name: 'src/db/sqlite/schema.ts', shape: sqliteShape(sqliteSchema) },
  { name: 'src/db/postgres/schema.ts', shape: postgresShape(postgresSchema) },
)
if (dialectDrift.length) {
  for (const problem of dialectDrift) console.error(`check:generated: ${problem}`)
  console.error('check:generated: the two dialects\' schemas must declare the same indexes and constraints; make them agree, then npm run db:generate')
  failed = true
} else {
  console.log('check:generated: src/db/sqlite/schema.ts and src/db/postgres/schema.ts declare the same keys, indexes and unique constraints')
}
process.exit(failed ? 1 : 0)
