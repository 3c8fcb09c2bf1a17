import { defineConfig } from 'drizzle-kit'

// Paths are relative to the repository root (npm scripts run there).
export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/schema.ts',
  out: './drizzle',
})
