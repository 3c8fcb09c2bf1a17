import { loadConfig } from '../config.js'

/**
 * `service-mcp serve`: the server (or the conformance profile's) in the foreground, until SIGTERM or SIGINT. The
 * settings are the server's to read: `settingsArgv` are the flags as given.
 */
export async function serve(settingsArgv: readonly string[]): Promise<void> {
  const argv = [...settingsArgv]
  const profile = loadConfig({ argv }).profile
  const conformance = profile === 'conformance' ? await (await import('../conformance/profile.js')).createConformanceServer({ argv }) : null
  // The first-start credentials are printed by createServer's default onBootstrap (bootstrap.ts), once it listens.
  const server = conformance ?? await (await import('../index.js')).createServer({ argv })
  let url: string
  try {
    url = await server.listen()
  } catch (err) {
    // The database is released (and its lock) before the one-line message: a port in use is a setting like any other.
    await server.close().catch(() => {})
    throw err
  }
  // Before the line that says it listens: whoever waits for that line may stop it at once, and a SIGTERM that comes
  // before a handler ends the process without a clean stop.
  server.closeOnSignals()
  if (conformance) process.stderr.write(conformance.banner())
  server.app.log.info({ url: `${url}/mcp` }, 'MCP server listening')
}
