#!/usr/bin/env node
/**
 * service-mcp command line: `serve`, `migrate`, and admin commands for organizations, users, memberships, API keys,
 * OAuth clients and signing keys (the table is cli/commands.ts, read by cli/usage.ts).
 * Settings come from SERVICE_* variables or the flags of the configuration table (`--database`, `--port`, …).
 * Exit codes: 0 done; 2 a mistake in the command or the settings (one line on stderr); 1 anything else.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CheckFailed, UsageError, type Command, type Context } from './cli/command.js'
import { AreaUsageError, parseInvocation } from './cli/usage.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { storageFailure } from './db/open.js'
import { openRepos } from './db/open-repos.js'
import type { Repos } from './db/repos/index.js'
import { maskCredentials } from './lib/mask-credentials.js'
import { packageRoot } from './lib/package-root.js'
import { SERVICE_MCP_VERSION } from './version.js'

/** `service-mcp --version`: the package's version and the build's release date. */
function version(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }
  return `service-mcp ${pkg.version} (build ${SERVICE_MCP_VERSION})`
}

function out(line: string): void {
  process.stdout.write(line + '\n')
}

/** Warnings of the storage and of the barrier (a server that did not acknowledge a change), on stderr. */
function warn(message: string): void {
  process.stderr.write(`service-mcp: ${maskCredentials(message)}\n`)
}

/** What a command runs with: its settings and its repositories, opened as it declares and only when it asks. */
function contextFor(command: Command, config: Config, args: string[], options: Record<string, string>, settingsArgv: string[]): Context & { close(): Promise<void> } {
  let opened: Promise<{ repos: Repos; close(): Promise<void> }> | undefined
  return {
    args,
    options,
    settingsArgv,
    config,
    async repos() {
      opened ??= openRepos(config, warn, { changesCredentials: command.changesCredentials === true, create: command.database === 'create' })
      return (await opened).repos
    },
    out,
    warn,
    async close() {
      if (opened) await (await opened.catch(() => undefined))?.close()
    },
  }
}

async function main(argv: string[]): Promise<void> {
  const invocation = parseInvocation(argv)
  if (invocation.kind === 'version') return out(version())
  if (invocation.kind === 'help') return out(invocation.text)
  const { command, args, options, settingsArgv } = invocation
  // Only what opens env var values needs the env key; every other command works on PostgreSQL without it.
  const config = loadConfig({ argv: settingsArgv, requireEnvKey: command.needsEnvKey === true })
  const context = contextFor(command, config, args, options, settingsArgv)
  try {
    await command.run(context)
  } finally {
    await context.close()
  }
}

/**
 * A storage failure of any command (an admin command on a full disk, a corrupt file) as the one-line DatabaseError
 * naming the file and SERVICE_DATABASE; undefined for anything else.
 */
function asStorageFailure(argv: string[], err: unknown): Error | undefined {
  let database: string
  try {
    const invocation = parseInvocation(argv)
    if (invocation.kind !== 'run') return undefined
    database = loadConfig({ argv: invocation.settingsArgv, requireEnvKey: false }).database
  } catch {
    return undefined
  }
  return storageFailure(database, err)
}

main(process.argv.slice(2)).catch((caught: unknown) => {
  const err = caught instanceof ConfigError || caught instanceof UsageError ? caught : asStorageFailure(process.argv.slice(2), caught) ?? caught
  // Whatever is printed passes the one mask: a driver's error may quote a URL of the settings, password included.
  if (err instanceof UsageError || err instanceof ConfigError) {
    // One line, whatever the message holds: exit code 2 means "fix the command or the settings".
    process.stderr.write(`service-mcp: ${maskCredentials(err.message.replace(/\s*\n\s*/g, ' '))}\n`)
    if (err instanceof AreaUsageError) process.stderr.write(`Usage:\n${err.lines.join('\n')}\n`)
    else if (err instanceof UsageError) process.stderr.write(`See service-mcp ${err.command ? `${err.command} ` : ''}--help.\n`)
    process.exit(2)
  }
  if (err instanceof CheckFailed) {
    process.stderr.write(`service-mcp: ${maskCredentials(err.message)}\n`)
    process.exit(1)
  }
  process.stderr.write(`service-mcp: ${maskCredentials((err as Error).stack ?? String(err))}\n`)
  process.exit(1)
})
