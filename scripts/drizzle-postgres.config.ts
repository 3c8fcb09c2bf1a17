import { defineConfig } from 'drizzle-kit'

// PostgreSQL's migrations (SQLite's: drizzle.config.ts). Paths are relative to the repository root.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/postgres/schema.ts',
  out: './drizzle/postgres',
})
