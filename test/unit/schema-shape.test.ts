import t from 'tap'
import * as postgresSchema from '../../src/db/postgres/schema.js'
import * as sqliteSchema from '../../src/db/sqlite/schema.js'
import { compareShapes, postgresShape, sqliteShape, type SchemaShape } from '../../scripts/schema-shape.js'

/**
 * The drift check between the two dialects' schemas (scripts/schema-shape.ts, run by check-generated.ts): the committed
 * schemas agree, and a hand-made pair that differs by one index or constraint is reported, naming table and index.
 */

function shape(): SchemaShape {
  return {
    apps: {
      primaryKey: ['id'],
      indexes: {
        apps_org_name_idx: { columns: ['organization_id', 'name'], unique: true, partial: false },
        apps_org_id_idx: { columns: ['organization_id', 'id'], unique: false, partial: false },
      },
      uniques: { apps_slug_unique: ['slug'] },
    },
  }
}

const a = (s: SchemaShape) => ({ name: 'sqlite.ts', shape: s })
const b = (s: SchemaShape) => ({ name: 'postgres.ts', shape: s })

t.test('the committed schemas declare the same keys, indexes and unique constraints', async (t) => {
  const sqlite = sqliteShape(sqliteSchema)
  const postgres = postgresShape(postgresSchema)
  t.ok(Object.keys(sqlite).length > 20, 'every table is read')
  t.same(sqlite.memberships?.indexes.memberships_user_org_idx, { columns: ['user_id', 'organization_id'], unique: true, partial: false })
  t.same(sqlite.deployment_logs?.primaryKey, ['deployment_id', 'seq'], 'a composite primary key')
  t.same(compareShapes(a(sqlite), b(postgres)), [])
})

t.test('identical shapes agree', async (t) => {
  t.same(compareShapes(a(shape()), b(shape())), [])
})

t.test('an index missing from one dialect is reported with its table and name', async (t) => {
  const missing = shape()
  delete missing.apps!.indexes.apps_org_id_idx
  t.same(compareShapes(a(shape()), b(missing)), ['table apps: index apps_org_id_idx (organization_id, id) is in sqlite.ts but not in postgres.ts'])
  t.same(compareShapes(a(missing), b(shape())), ['table apps: index apps_org_id_idx (organization_id, id) is in postgres.ts but not in sqlite.ts'])
})

t.test('an index that differs in its columns, their order, or uniqueness is reported', async (t) => {
  const reordered = shape()
  reordered.apps!.indexes.apps_org_name_idx = { columns: ['name', 'organization_id'], unique: true, partial: false }
  t.same(compareShapes(a(shape()), b(reordered)), ['table apps: index apps_org_name_idx is unique (organization_id, name) in sqlite.ts but unique (name, organization_id) in postgres.ts'])
  const notUnique = shape()
  notUnique.apps!.indexes.apps_org_name_idx!.unique = false
  t.same(compareShapes(a(shape()), b(notUnique)), ['table apps: index apps_org_name_idx is unique (organization_id, name) in sqlite.ts but (organization_id, name) in postgres.ts'])
})

t.test('a unique constraint, a primary key or a table missing from one dialect is reported', async (t) => {
  const noUnique = shape()
  noUnique.apps!.uniques = {}
  t.same(compareShapes(a(shape()), b(noUnique)), ['table apps: unique constraint apps_slug_unique (slug) is in sqlite.ts but not in postgres.ts'])
  const otherKey = shape()
  otherKey.apps!.primaryKey = ['organization_id', 'id']
  t.same(compareShapes(a(shape()), b(otherKey)), ['table apps: primary key (id) in sqlite.ts, (organization_id, id) in postgres.ts'])
  t.same(compareShapes(a(shape()), b({})), ['table apps is in sqlite.ts but not in postgres.ts'])
})
