/**
 * The shape of a Drizzle schema that the two dialects must agree on beyond their columns (whose rows
 * src/db/schema-rows.ts compares at compile time): each table's primary key, indexes and unique constraints. A query
 * that is fast, or a write that is refused as a duplicate, on one database must be so on the other; an index added to
 * one schema only would pass every test of the other pass. check-generated.ts compares the two schemas with
 * compareShapes (docs/decisions/storage.md).
 */
import { getTableConfig as postgresTableConfig, PgTable } from 'drizzle-orm/pg-core'
import { getTableConfig as sqliteTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core'

export interface IndexShape {
  /** The indexed columns, by their names in the database, in order. */
  columns: string[]
  unique: boolean
  /** Whether the index covers only the rows a WHERE clause selects. */
  partial: boolean
}

export interface TableShape {
  primaryKey: string[]
  /** By index name. */
  indexes: Record<string, IndexShape>
  /** Unique constraints (a table's, or a column's `.unique()`), by constraint name: their columns in order. */
  uniques: Record<string, string[]>
}

/** By table name (in the database). */
export type SchemaShape = Record<string, TableShape>

/** A schema as check-generated.ts names it in its messages (its file), with its shape. */
export interface NamedShape {
  name: string
  shape: SchemaShape
}

interface TableConfig {
  name: string
  columns: Array<{ name: string; primary: boolean; isUnique: boolean; uniqueName?: string | undefined }>
  indexes: Array<{ config: { name: string; columns: unknown[]; unique: boolean; where?: unknown } }>
  uniqueConstraints: Array<{ getName(): string | undefined; columns: Array<{ name: string }> }>
  primaryKeys: Array<{ columns: Array<{ name: string }> }>
}

/** The shape of every SQLite table a schema module exports. */
export function sqliteShape(schema: Record<string, unknown>): SchemaShape {
  return shapeOf(Object.values(schema).filter((v) => v instanceof SQLiteTable).map((t) => sqliteTableConfig(t as SQLiteTable) as TableConfig))
}

/** The shape of every PostgreSQL table a schema module exports. */
export function postgresShape(schema: Record<string, unknown>): SchemaShape {
  return shapeOf(Object.values(schema).filter((v) => v instanceof PgTable).map((t) => postgresTableConfig(t as PgTable) as unknown as TableConfig))
}

function shapeOf(configs: TableConfig[]): SchemaShape {
  const shape: SchemaShape = {}
  for (const config of configs) {
    const primaryKey = config.primaryKeys[0]?.columns.map((c) => c.name) ?? config.columns.filter((c) => c.primary).map((c) => c.name)
    const indexes: Record<string, IndexShape> = {}
    for (const { config: index } of config.indexes) {
      indexes[index.name] = { columns: index.columns.map(columnName), unique: index.unique, partial: index.where !== undefined }
    }
    const uniques: Record<string, string[]> = {}
    for (const constraint of config.uniqueConstraints) uniques[constraint.getName() ?? '(unnamed)'] = constraint.columns.map((c) => c.name)
    for (const column of config.columns) if (column.isUnique) uniques[column.uniqueName ?? `${config.name}_${column.name}_unique`] = [column.name]
    shape[config.name] = { primaryKey, indexes, uniques }
  }
  return shape
}

/** An index's column, or an expression (which has no name of its own: compared by being one). */
function columnName(column: unknown): string {
  const name = (column as { name?: unknown }).name
  return typeof name === 'string' ? name : '(expression)'
}

/**
 * Where the two schemas disagree, one line each naming the table and the index or constraint; empty when they agree.
 * Tables present in only one schema are reported too (their columns are compared elsewhere, but an index check that
 * skipped them would pass a table missing whole).
 */
export function compareShapes(a: NamedShape, b: NamedShape): string[] {
  const problems: string[] = []
  for (const table of union(Object.keys(a.shape), Object.keys(b.shape))) {
    const ta = a.shape[table]
    const tb = b.shape[table]
    if (!ta || !tb) {
      problems.push(`table ${table} is in ${(ta ? a : b).name} but not in ${(ta ? b : a).name}`)
      continue
    }
    if (!sameList(ta.primaryKey, tb.primaryKey)) {
      problems.push(`table ${table}: primary key (${ta.primaryKey.join(', ')}) in ${a.name}, (${tb.primaryKey.join(', ')}) in ${b.name}`)
    }
    problems.push(...compareNamed(table, 'index', ta.indexes, tb.indexes, describeIndex, a.name, b.name))
    problems.push(...compareNamed(table, 'unique constraint', ta.uniques, tb.uniques, (columns) => `(${columns.join(', ')})`, a.name, b.name))
  }
  return problems
}

function compareNamed<T>(table: string, kind: string, a: Record<string, T>, b: Record<string, T>, describe: (item: T) => string, aName: string, bName: string): string[] {
  const problems: string[] = []
  for (const name of union(Object.keys(a), Object.keys(b))) {
    const ia = a[name]
    const ib = b[name]
    if (ia === undefined || ib === undefined) {
      problems.push(`table ${table}: ${kind} ${name} ${describe((ia ?? ib)!)} is in ${ia ? aName : bName} but not in ${ia ? bName : aName}`)
    } else if (describe(ia) !== describe(ib)) {
      problems.push(`table ${table}: ${kind} ${name} is ${describe(ia)} in ${aName} but ${describe(ib)} in ${bName}`)
    }
  }
  return problems
}

function describeIndex(index: IndexShape): string {
  return `${index.unique ? 'unique ' : ''}(${index.columns.join(', ')})${index.partial ? ' partial' : ''}`
}

function union(a: string[], b: string[]): string[] {
  return [...new Set([...a, ...b])].sort()
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}
