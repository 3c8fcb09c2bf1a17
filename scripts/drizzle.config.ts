import { defineConfig } from 'drizzle-kit'

// Paths are relative to the repository root (npm scripts run there).
export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/sqlite/schema.ts',
  out: './drizzle',
})
