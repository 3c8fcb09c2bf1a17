import { defineConfig } from 'drizzle-kit'

// PostgreSQL's migrations (SQLite's: drizzle.config.ts). Paths are relative to the repository root.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema-postgres.ts',
  out: './drizzle/postgres',
})
