import { readFileSync, statSync } from 'node:fs'
import { isIP } from 'node:net'
import { isAbsolute, join, resolve } from 'node:path'
import { classifyDatabase, type DatabaseTarget } from './lib/database-url.js'
import { closeMatch, editDistance } from './lib/closest.js'
import { isPasswordHash } from './lib/crypto.js'
import { jsonSetting } from './lib/json-setting.js'
import { maskCredentials } from './lib/mask-credentials.js'
import { packageRoot } from './lib/package-root.js'
import { parseSignInProviders, ProviderConfigProblem, type SignInProvider } from './lib/sign-in-providers.js'
import { parseTrustedIssuers, type TrustedIssuer } from './lib/trusted-issuers.js'

/**
 * Configuration: one table of settings, each with its environment variable, its command-line flag, its default and
 * its check. Precedence: flag > environment > config file (SERVICE_CONFIG, JSON) > default. Everything is validated
 * once at start; a bad value stops the process with a sentence that names the variable and the value.
 * Every time constant is configurable so tests can run in milliseconds; the defaults are the contract's.
 */

type Kind = 'string' | 'int' | 'bool' | 'list' | 'url' | 'level' | 'pipelines' | 'proxy' | 'providers' | 'trustedIssuers'

interface Setting {
  key: keyof RawConfig
  env: string
  flag: string
  kind: Kind
  default: unknown
  min?: number
  max?: number
  doc: string
}

interface RawConfig {
  host: string
  port: number
  baseUrl: string
  database: string
  redisUrl: string
  redisPrefix: string
  leaseMs: number
  readyRedisTimeoutMs: number
  diskMinFreeMb: number
  auditSignIntervalMs: number
  diskCheckMs: number
  configFile: string
  logLevel: string
  accessLog: boolean
  metrics: boolean
  metricsToken: string
  tracing: string
  otlpEndpoint: string
  profile: string
  bootstrapEmail: string
  bootstrapPassword: string
  bootstrapPasswordHash: string
  bootstrapApiKey: string
  allowedOrigins: string[]
  trustProxy: TrustProxy
  maxBodyBytes: number
  sessionIdleMs: number
  sessionSweepMs: number
  sessionTouchFlushMs: number
  heartbeatMs: number
  sseReplayEvents: number
  sseRetainMs: number
  pageSize: number
  accessTokenTtlMs: number
  refreshTokenIdleMs: number
  refreshTokenMaxMs: number
  authCodeTtlMs: number
  authRequestTtlMs: number
  browserSessionTtlMs: number
  accountNoticeTtlMs: number
  redirectSchemes: string[]
  registration: boolean
  envKey: string
  envKeyFile: string
  pipelines: Record<string, PipelineConfig>
  pipelineTimeoutMs: number
  pipelineGraceMs: number
  deploymentOutputMaxBytes: number
  deploymentOutputKeepRuns: number
  deploymentOutputKeepDays: number
  auditRetentionDays: number
  retentionIntervalMs: number
  retentionBatch: number
  stopSettleMs: number
  elicitationTimeoutMs: number
  listTtlMs: number
  readTtlMs: number
  resourceSubscriptionsMax: number
  resourceUpdateIntervalMs: number
  discoverTtlMs: number
  taskTtlMs: number
  taskPollIntervalMs: number
  taskInputTimeoutMs: number
  listenCheckMs: number
  listenMaxPerMember: number
  rateLimitWindowMs: number
  rateLimitOAuthMember: number
  rateLimitApiKeyMember: number
  rateLimitOrganization: number
  rateLimitToolFactor: number
  quotaApps: number
  quotaEnvVarsPerApp: number
  quotaConcurrentDeployments: number
  quotaDeploymentOutputMb: number
  registerRateLimit: number
  registerRateLimitWindowMs: number
  maxBatchSize: number
  headersTimeoutMs: number
  requestTimeoutMs: number
  lingerMs: number
  maxConnectionsPerAddress: number
  sseMaxBufferedBytes: number
  signInFreeAttempts: number
  signInAddressFreeAttempts: number
  signInDelayMs: number
  signInMaxDelayMs: number
  authorizeRateLimit: number
  authorizeRateLimitWindowMs: number
  pendingAuthorizationsPerAddress: number
  signInProviders: SignInProvider[]
  passwordSignIn: string
  signInFlowTtlMs: number
  idTokenClockToleranceMs: number
  upstreamTimeoutMs: number
  upstreamDiscoveryTtlMs: number
  trustedIssuers: TrustedIssuer[]
  assertionMaxLifetimeMs: number
  assertionClockToleranceMs: number
  jwksTimeoutMs: number
  jwksCooldownMs: number
  jwksCacheMs: number
  clientDocuments: ClientDocumentPolicy
  clientDocumentHosts: string[]
  clientDocumentsUnsafeLoopbackHosts: string[]
  clientDocumentTimeoutMs: number
  clientDocumentMaxBytes: number
  clientDocumentCacheEntries: number
  clientDocumentCacheMinMs: number
  clientDocumentCacheMaxMs: number
  clientDocumentFailureCacheMs: number
  clientDocumentFetchLimit: number
  clientDocumentFetchLimitWindowMs: number
}

/** SERVICE_CLIENT_DOCUMENTS: which client metadata documents (https client_id URLs) the server fetches. */
export const CLIENT_DOCUMENT_POLICIES = ['all', 'listed', 'off'] as const
export type ClientDocumentPolicy = (typeof CLIENT_DOCUMENT_POLICIES)[number]

/** An operator-configured deployment pipeline: the argv of a child process (never taken from a tool argument). */
export interface PipelineConfig {
  argv: string[]
  /** Working directory; the package root by default. */
  cwd?: string
}

/**
 * SERVICE_TRUST_PROXY: whose word to take about the client's address (rate limits, sign-in throttling and logs key on
 * it). `false`: nobody, the connection's own address. A list of the proxies' addresses and CIDR ranges (or the named
 * ranges `loopback`, `linklocal`, `uniquelocal`): X-Forwarded-For is read from the right past every listed hop, and a
 * peer not listed is never believed. A hop count: that many proxies in front, whoever connects. `true`: every hop, so
 * the left-most address, which a client writes itself unless the proxy overwrites the header.
 */
export type TrustProxy = boolean | number | string[]

/** The named ranges the proxy list may use besides addresses and CIDRs (Fastify's proxy-addr knows them). */
const PROXY_RANGES = ['loopback', 'linklocal', 'uniquelocal']

function parseTrustProxy(raw: unknown, where: string): TrustProxy {
  const explain = 'must be false, true, a number of proxies (1 for one proxy in front) or the proxies\' addresses (e.g. 127.0.0.1,10.0.0.0/8)'
  if (typeof raw === 'boolean') return raw
  const hops = (n: number) => {
    if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`${where} ${explain}, got ${JSON.stringify(raw)}`)
    return n === 0 ? false : n
  }
  if (typeof raw === 'number') return hops(raw)
  const entries = Array.isArray(raw) ? raw.map((x) => String(x).trim()) : String(raw).split(',').map((x) => x.trim())
  const list = entries.filter(Boolean)
  if (!Array.isArray(raw) && list.length <= 1) {
    const v = (list[0] ?? '').toLowerCase()
    if (['true', 'yes', 'on'].includes(v)) return true
    if (['false', 'no', 'off', ''].includes(v)) return false
    if (/^\d+$/.test(v)) return hops(Number(v))
  }
  for (const entry of list) {
    const [address = '', prefix, extra] = entry.split('/')
    const family = isIP(address)
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32))
    if (PROXY_RANGES.includes(entry) || (family !== 0 && prefixOk && extra === undefined)) continue
    throw new ConfigError(`${where} ${explain}: entry ${JSON.stringify(entry)} is not an IP address, a CIDR range or one of ${PROXY_RANGES.join(', ')}`)
  }
  return list.length === 0 ? false : list
}

/** True for 32 bytes in base64 or base64url. */
export function isEnvKey(value: string): boolean {
  return /^[A-Za-z0-9+/_-]{43}=?$/.test(value) && Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64').length === 32
}

/** Redirect URI schemes refused whatever the configuration says. */
export const FORBIDDEN_REDIRECT_SCHEMES = ['javascript', 'vbscript', 'data', 'blob', 'file', 'about', 'mailto', 'filesystem', 'view-source', 'ws', 'wss', 'ftp']


/** Profiles `serve` knows (src/conformance/profile.ts). */
export const PROFILES = ['conformance'] as const

/** The loopback names a profile without authentication may listen on. */
export function isLoopbackHost(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === '[::1]' || host === 'localhost'
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/** SERVICE_TRACING's values. */
export const TRACING_MODES = ['off', 'otlp', 'console'] as const

export const SETTINGS: readonly Setting[] = [
  { key: 'host', env: 'SERVICE_HOST', flag: '--host', kind: 'string', default: '127.0.0.1', doc: 'Interface to listen on; an address that is not loopback (0.0.0.0, ::, a LAN address) needs SERVICE_BASE_URL' },
  { key: 'port', env: 'SERVICE_PORT', flag: '--port', kind: 'int', default: 3000, min: 0, max: 65535, doc: 'TCP port (0 picks a free port)' },
  { key: 'baseUrl', env: 'SERVICE_BASE_URL', flag: '--base-url', kind: 'url', default: '', doc: 'Public base address (the one clients use); default `http://{host}:{port}` for a loopback host, required for any other' },
  { key: 'database', env: 'SERVICE_DATABASE', flag: '--database', kind: 'string', default: './data/service.db', doc: 'SQLite file (`:memory:` for a throwaway database), or a PostgreSQL database: `postgres://user:password@host/db`' },
  { key: 'redisUrl', env: 'SERVICE_REDIS_URL', flag: '--redis-url', kind: 'string', default: '', doc: 'Redis (`redis://` or `rediss://`) that several processes serving one PostgreSQL database coordinate through; empty: one process serves the database' },
  { key: 'redisPrefix', env: 'SERVICE_REDIS_PREFIX', flag: '--redis-prefix', kind: 'string', default: 'service-mcp:', doc: 'Prefix of every Redis key and channel the server uses (several deployments can share one Redis)' },
  { key: 'leaseMs', env: 'SERVICE_LEASE_MS', flag: '--lease-ms', kind: 'int', default: 15_000, min: 3, doc: 'A process renews its lease in the database three times per this period; a process whose lease lapsed is dead, and its deployments, confirmed calls and tasks are recovered as interrupted (15 s)' },
  { key: 'auditSignIntervalMs', env: 'SERVICE_AUDIT_SIGN_INTERVAL_MS', flag: '--audit-sign-interval-ms', kind: 'int', default: 3_600_000, min: 1, doc: 'How often the head of each organization\'s audit chain is signed with the server\'s signing key, when it grew (1 h); `audit export` signs it first anyway' },
  { key: 'diskMinFreeMb', env: 'SERVICE_DISK_MIN_FREE_MB', flag: '--disk-min-free-mb', kind: 'int', default: 256, min: 0, doc: 'SQLite: under this much free space (MiB) in the database\'s folder, `GET /readyz` reports the process unready and the log warns, before writes start failing; 0 turns the check off' },
  { key: 'diskCheckMs', env: 'SERVICE_DISK_CHECK_MS', flag: '--disk-check-ms', kind: 'int', default: 60_000, min: 1, doc: 'SQLite: how often the free space in the database\'s folder is checked between `GET /readyz` calls, so the warning is logged without a balancer polling (1 min)' },
  { key: 'readyRedisTimeoutMs', env: 'SERVICE_READY_REDIS_TIMEOUT_MS', flag: '--ready-redis-timeout-ms', kind: 'int', default: 1_000, min: 1, doc: 'With SERVICE_REDIS_URL: how long `GET /readyz` waits for Redis to answer a PING before it reports the process unready (1 s)' },
  { key: 'configFile', env: 'SERVICE_CONFIG', flag: '--config', kind: 'string', default: '', doc: 'JSON config file for structured settings (any key of this table, camelCase; an unknown key stops the start)' },
  { key: 'logLevel', env: 'SERVICE_LOG_LEVEL', flag: '--log-level', kind: 'level', default: 'info', doc: `Log level: ${LEVELS.join(', ')}` },
  { key: 'accessLog', env: 'SERVICE_ACCESS_LOG', flag: '--access-log', kind: 'bool', default: false, doc: 'Log one info line per finished response: request id, method, path (no query), status, duration, client address, user agent, JSON-RPC method' },
  { key: 'metrics', env: 'SERVICE_METRICS', flag: '--metrics', kind: 'bool', default: false, doc: 'Serve Prometheus metrics at `GET /metrics` on the main listener' },
  { key: 'metricsToken', env: 'SERVICE_METRICS_TOKEN', flag: '--metrics-token', kind: 'string', default: '', doc: 'When set, `GET /metrics` needs `Authorization: Bearer <this token>`' },
  { key: 'tracing', env: 'SERVICE_TRACING', flag: '--tracing', kind: 'string', default: 'off', doc: 'OpenTelemetry traces: `off`, `otlp` (OTLP over HTTP to SERVICE_OTLP_ENDPOINT) or `console` (printed on stdout, for debugging)' },
  { key: 'otlpEndpoint', env: 'SERVICE_OTLP_ENDPOINT', flag: '--otlp-endpoint', kind: 'url', default: 'http://127.0.0.1:4318/v1/traces', doc: 'Where `SERVICE_TRACING=otlp` sends traces (OTLP over HTTP, protobuf)' },
  { key: 'profile', env: 'SERVICE_PROFILE', flag: '--profile', kind: 'string', default: '', doc: '`conformance`: `serve` runs the reference server of the official MCP conformance suite (its fixtures only, no authentication, an in-memory database, loopback only)' },
  { key: 'bootstrapEmail', env: 'SERVICE_BOOTSTRAP_EMAIL', flag: '--bootstrap-email', kind: 'string', default: 'owner@example.com', doc: 'Email of the owner created on an empty database' },
  { key: 'bootstrapPasswordHash', env: 'SERVICE_BOOTSTRAP_PASSWORD_HASH', flag: '--bootstrap-password-hash', kind: 'string', default: '', doc: 'Instead of SERVICE_BOOTSTRAP_PASSWORD: the owner password\'s scrypt hash (`scrypt$16384$8$1$…`, as the users table stores it), so no plain password sits in the environment or a file' },
  { key: 'bootstrapPassword', env: 'SERVICE_BOOTSTRAP_PASSWORD', flag: '--bootstrap-password', kind: 'string', default: '', doc: 'Password of that owner; generated and printed once when empty' },
  { key: 'bootstrapApiKey', env: 'SERVICE_BOOTSTRAP_API_KEY', flag: '--bootstrap-api-key', kind: 'string', default: '', doc: 'Exact `service_mcp_…` key registered for that owner (both scopes); generated and printed once when empty' },
  { key: 'allowedOrigins', env: 'SERVICE_ALLOWED_ORIGINS', flag: '--allowed-origins', kind: 'list', default: [], doc: 'Comma-separated browser origins allowed on /mcp besides the base address' },
  { key: 'trustProxy', env: 'SERVICE_TRUST_PROXY', flag: '--trust-proxy', kind: 'proxy', default: false, doc: 'Whose `X-Forwarded-For` to believe about the client address: `false` (nobody), the proxies\' addresses or CIDR ranges (`127.0.0.1`, `10.0.0.0/8`, `loopback`, `uniquelocal`; the precise form), a number of proxies in front (`1`), or `true` (every hop: only if the proxy overwrites the header). Hop counts and `true` believe any peer, so the server must be reachable only through the proxy' },
  { key: 'maxBodyBytes', env: 'SERVICE_MAX_BODY_BYTES', flag: '--max-body-bytes', kind: 'int', default: 1_048_576, min: 1024, max: 64 * 1_048_576, doc: 'Largest accepted request body on /mcp' },
  { key: 'sessionIdleMs', env: 'SERVICE_SESSION_IDLE_MS', flag: '--session-idle-ms', kind: 'int', default: 3_600_000, min: 1, doc: 'Idle time after which a session expires (60 min)' },
  { key: 'sessionSweepMs', env: 'SERVICE_SESSION_SWEEP_MS', flag: '--session-sweep-ms', kind: 'int', default: 30_000, min: 1, doc: 'How often expired sessions are closed and purged' },
  { key: 'sessionTouchFlushMs', env: 'SERVICE_SESSION_TOUCH_FLUSH_MS', flag: '--session-touch-flush-ms', kind: 'int', default: 1_000, min: 1, doc: 'How often session activity is written to the database' },
  { key: 'heartbeatMs', env: 'SERVICE_HEARTBEAT_MS', flag: '--heartbeat-ms', kind: 'int', default: 25_000, min: 1, doc: 'Interval of `: heartbeat` comments on open SSE streams (25 s)' },
  { key: 'sseReplayEvents', env: 'SERVICE_SSE_REPLAY_EVENTS', flag: '--sse-replay-events', kind: 'int', default: 500, min: 1, max: 100_000, doc: 'Events kept per SSE stream for a client that resumes with Last-Event-ID' },
  { key: 'sseRetainMs', env: 'SERVICE_SSE_RETAIN_MS', flag: '--sse-retain-ms', kind: 'int', default: 300_000, min: 1, doc: 'How long an ended stream whose client was disconnected stays resumable (5 min)' },
  { key: 'pageSize', env: 'SERVICE_PAGE_SIZE', flag: '--page-size', kind: 'int', default: 50, min: 1, max: 1000, doc: 'Entries per page of `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list`' },
  { key: 'accessTokenTtlMs', env: 'SERVICE_ACCESS_TOKEN_TTL_MS', flag: '--access-token-ttl-ms', kind: 'int', default: 3_600_000, min: 1000, doc: 'Lifetime of OAuth access tokens (3600 s)' },
  { key: 'refreshTokenIdleMs', env: 'SERVICE_REFRESH_TOKEN_IDLE_MS', flag: '--refresh-token-idle-ms', kind: 'int', default: 30 * 86_400_000, min: 1, doc: 'A refresh token unused this long expires; each use extends it (30 days)' },
  { key: 'refreshTokenMaxMs', env: 'SERVICE_REFRESH_TOKEN_MAX_MS', flag: '--refresh-token-max-ms', kind: 'int', default: 365 * 86_400_000, min: 1, doc: 'Absolute cap on a refresh-token family, from the first authorization (365 days)' },
  { key: 'authCodeTtlMs', env: 'SERVICE_AUTH_CODE_TTL_MS', flag: '--auth-code-ttl-ms', kind: 'int', default: 600_000, min: 1, max: 600_000, doc: 'Lifetime of authorization codes (10 min, the most allowed)' },
  { key: 'authRequestTtlMs', env: 'SERVICE_AUTH_REQUEST_TTL_MS', flag: '--auth-request-ttl-ms', kind: 'int', default: 900_000, min: 1, doc: 'How long a started authorization may wait for sign-in and consent (15 min)' },
  { key: 'browserSessionTtlMs', env: 'SERVICE_BROWSER_SESSION_TTL_MS', flag: '--browser-session-ttl-ms', kind: 'int', default: 43_200_000, min: 1, doc: 'How long a browser sign-in lasts (12 h)' },
  { key: 'accountNoticeTtlMs', env: 'SERVICE_ACCOUNT_NOTICE_TTL_MS', flag: '--account-notice-ttl-ms', kind: 'int', default: 300_000, min: 1, doc: 'How long a key created on /account (and the notice of a change there) waits, in memory only, for the page that shows it once; then it is dropped (5 min)' },
  { key: 'redirectSchemes', env: 'SERVICE_REDIRECT_SCHEMES', flag: '--redirect-schemes', kind: 'list', default: [], doc: 'Private-use redirect URI schemes clients may register, e.g. `cursor,vscode` (none by default)' },
  { key: 'registration', env: 'SERVICE_REGISTRATION', flag: '--registration', kind: 'bool', default: true, doc: 'Dynamic client registration at `/oauth/register`: `on`, or `off` for a server that accepts Client ID Metadata Documents only (it then leaves `registration_endpoint` out of its metadata); clients registered earlier keep working' },
  { key: 'envKey', env: 'SERVICE_ENV_KEY', flag: '--env-key', kind: 'string', default: '', doc: 'Key that encrypts env var values at rest: 32 bytes, base64; when empty, read from (or created in) SERVICE_ENV_KEY_FILE' },
  { key: 'envKeyFile', env: 'SERVICE_ENV_KEY_FILE', flag: '--env-key-file', kind: 'string', default: '', doc: 'File holding that key, created with mode 600 on first start (never for a database that already holds sealed values: a key that does not open them stops the start); default `env.key` beside the database' },
  { key: 'pipelines', env: 'SERVICE_PIPELINES', flag: '--pipelines', kind: 'pipelines', default: null, doc: 'Deployment pipelines, JSON `{"name": {"argv": [...], "cwd": "..."}}` (best in the config file); each `cwd` must be a folder at start; default: `default` runs `scripts/pipelines/example.mjs`' },
  { key: 'pipelineTimeoutMs', env: 'SERVICE_PIPELINE_TIMEOUT_MS', flag: '--pipeline-timeout-ms', kind: 'int', default: 1_800_000, min: 1, doc: 'A pipeline run still going after this long is stopped and fails (30 min)' },
  { key: 'pipelineGraceMs', env: 'SERVICE_PIPELINE_GRACE_MS', flag: '--pipeline-grace-ms', kind: 'int', default: 5_000, min: 1, doc: 'Time between SIGTERM and SIGKILL when a run is cancelled or the server stops' },
  { key: 'deploymentOutputMaxBytes', env: 'SERVICE_DEPLOYMENT_OUTPUT_MAX_BYTES', flag: '--deployment-output-max-bytes', kind: 'int', default: 10 * 1_048_576, min: 0, doc: 'Stored output of one run, in bytes (10 MiB): past it the stored log ends with a line saying where and why it was cut, the rest is streamed but not stored, and the run goes on; 0: no cap' },
  { key: 'deploymentOutputKeepRuns', env: 'SERVICE_DEPLOYMENT_OUTPUT_KEEP_RUNS', flag: '--deployment-output-keep-runs', kind: 'int', default: 100, min: 0, doc: 'Per app, the newest this many ended runs keep their output; retention deletes the output of older ones (the runs stay listed); 0: no count limit' },
  { key: 'deploymentOutputKeepDays', env: 'SERVICE_DEPLOYMENT_OUTPUT_KEEP_DAYS', flag: '--deployment-output-keep-days', kind: 'int', default: 90, min: 0, doc: 'Retention deletes the output of runs that ended more than this many days ago (the runs stay listed); 0: no age limit' },
  { key: 'auditRetentionDays', env: 'SERVICE_AUDIT_RETENTION_DAYS', flag: '--audit-retention-days', kind: 'int', default: 0, min: 0, doc: 'Audit entries older than this many days are deleted, after a signed checkpoint records where the kept chain starts; 0: kept forever' },
  { key: 'retentionIntervalMs', env: 'SERVICE_RETENTION_INTERVAL_MS', flag: '--retention-interval-ms', kind: 'int', default: 3_600_000, min: 1, doc: 'How often retention purges deployment output and audit entries (1 h); with several processes one of them does' },
  { key: 'retentionBatch', env: 'SERVICE_RETENTION_BATCH', flag: '--retention-batch', kind: 'int', default: 500, min: 1, max: 100_000, doc: 'Rows a retention purge deletes per transaction; requests run between two batches' },
  { key: 'stopSettleMs', env: 'SERVICE_STOP_SETTLE_MS', flag: '--stop-settle-ms', kind: 'int', default: 3_000, min: 0, doc: 'On SIGTERM, how long requests in flight (and the idle connections of a proxy in front) get to end before the server stops what still runs; meanwhile new connections are refused and new requests on open ones answered 503 (3 s; 0: no wait)' },
  { key: 'elicitationTimeoutMs', env: 'SERVICE_ELICITATION_TIMEOUT_MS', flag: '--elicitation-timeout-ms', kind: 'int', default: 120_000, min: 1, doc: 'How long a confirmation prompt, or a value asked for in the browser, waits for the user (120 s)' },
  { key: 'listTtlMs', env: 'SERVICE_LIST_TTL_MS', flag: '--list-ttl-ms', kind: 'int', default: 60_000, min: 0, doc: '`ttlMs` of `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list` results on 2026-07-28 requests: how long a client may reuse them (1 min)' },
  { key: 'readTtlMs', env: 'SERVICE_READ_TTL_MS', flag: '--read-ttl-ms', kind: 'int', default: 0, min: 0, doc: '`ttlMs` of `resources/read` results on 2026-07-28 requests (0: read again each time; deployment logs grow)' },
  { key: 'resourceSubscriptionsMax', env: 'SERVICE_RESOURCE_SUBSCRIPTIONS_MAX', flag: '--resource-subscriptions-max', kind: 'int', default: 100, min: 1, doc: 'Resources one session may subscribe to (`resources/subscribe`)' },
  { key: 'resourceUpdateIntervalMs', env: 'SERVICE_RESOURCE_UPDATE_INTERVAL_MS', flag: '--resource-update-interval-ms', kind: 'int', default: 250, min: 1, doc: 'Shortest time between two `notifications/resources/updated` for a resource that keeps changing (a running deployment\'s log); its last change is always announced' },
  { key: 'discoverTtlMs', env: 'SERVICE_DISCOVER_TTL_MS', flag: '--discover-ttl-ms', kind: 'int', default: 3_600_000, min: 0, doc: '`ttlMs` of `server/discover` results (1 h)' },
  { key: 'taskTtlMs', env: 'SERVICE_TASK_TTL_MS', flag: '--task-ttl-ms', kind: 'int', default: 86_400_000, min: 1000, doc: 'How long a task (tasks extension) stays readable after it was created (24 h)' },
  { key: 'taskInputTimeoutMs', env: 'SERVICE_TASK_INPUT_TIMEOUT_MS', flag: '--task-input-timeout-ms', kind: 'int', default: 600_000, min: 1, doc: 'How long a task waits for the answers to its input requests (tasks/update) before its question fails with INPUT_TIMEOUT (10 min)' },
  { key: 'taskPollIntervalMs', env: 'SERVICE_TASK_POLL_INTERVAL_MS', flag: '--task-poll-interval-ms', kind: 'int', default: 2_000, min: 1, doc: '`pollIntervalMs` suggested to clients polling a task (2 s)' },
  { key: 'listenCheckMs', env: 'SERVICE_LISTEN_CHECK_MS', flag: '--listen-check-ms', kind: 'int', default: 30_000, min: 1, doc: 'How often a `subscriptions/listen` stream re-checks its credential and the tools it may see (30 s)' },
  { key: 'listenMaxPerMember', env: 'SERVICE_LISTEN_MAX_PER_MEMBER', flag: '--listen-max-per-member', kind: 'int', default: 10, min: 1, doc: 'Open `subscriptions/listen` streams a member may hold at once (429 beyond)' },
  { key: 'rateLimitWindowMs', env: 'SERVICE_RATE_LIMIT_WINDOW_MS', flag: '--rate-limit-window-ms', kind: 'int', default: 60_000, min: 1, doc: 'Window of the /mcp and per-tool rate limits (1 min)' },
  { key: 'rateLimitOAuthMember', env: 'SERVICE_RATE_LIMIT_OAUTH_MEMBER', flag: '--rate-limit-oauth-member', kind: 'int', default: 60, min: 1, doc: '/mcp requests per window per member using OAuth' },
  { key: 'rateLimitApiKeyMember', env: 'SERVICE_RATE_LIMIT_API_KEY_MEMBER', flag: '--rate-limit-api-key-member', kind: 'int', default: 30, min: 1, doc: '/mcp requests per window per member using an API key' },
  { key: 'rateLimitOrganization', env: 'SERVICE_RATE_LIMIT_ORGANIZATION', flag: '--rate-limit-organization', kind: 'int', default: 500, min: 1, doc: '/mcp requests per window per organization' },
  { key: 'rateLimitToolFactor', env: 'SERVICE_RATE_LIMIT_TOOL_FACTOR', flag: '--rate-limit-tool-factor', kind: 'int', default: 1, min: 1, doc: 'Multiplies every tool\'s declared calls-per-window limit' },
  { key: 'quotaApps', env: 'SERVICE_QUOTA_APPS', flag: '--quota-apps', kind: 'int', default: 1000, min: 0, doc: 'Apps one organization may have (0: unlimited); `service-mcp quotas set` gives an organization its own value' },
  { key: 'quotaEnvVarsPerApp', env: 'SERVICE_QUOTA_ENV_VARS_PER_APP', flag: '--quota-env-vars-per-app', kind: 'int', default: 200, min: 0, doc: 'Env vars one app may have (0: unlimited); replacing the value of an existing one is always allowed' },
  { key: 'quotaConcurrentDeployments', env: 'SERVICE_QUOTA_CONCURRENT_DEPLOYMENTS', flag: '--quota-concurrent-deployments', kind: 'int', default: 10, min: 0, doc: 'Deployments and rollbacks of one organization queued or running at once (0: unlimited)' },
  { key: 'quotaDeploymentOutputMb', env: 'SERVICE_QUOTA_DEPLOYMENT_OUTPUT_MB', flag: '--quota-deployment-output-mb', kind: 'int', default: 2048, min: 0, doc: 'Deployment output (MiB) one organization may keep stored; at or over it, no deployment of the organization starts until retention or deleted apps free some (0: unlimited)' },
  { key: 'registerRateLimit', env: 'SERVICE_REGISTER_RATE_LIMIT', flag: '--register-rate-limit', kind: 'int', default: 10, min: 1, doc: '`/oauth/register` requests per window per IP' },
  { key: 'registerRateLimitWindowMs', env: 'SERVICE_REGISTER_RATE_LIMIT_WINDOW_MS', flag: '--register-rate-limit-window-ms', kind: 'int', default: 3_600_000, min: 1, doc: 'Window of the `/oauth/register` limit (1 h)' },
  { key: 'maxBatchSize', env: 'SERVICE_MAX_BATCH_SIZE', flag: '--max-batch-size', kind: 'int', default: 20, min: 1, max: 1000, doc: 'Most messages in one JSON-RPC batch (2025-03-26 sessions); each counts against the rate limits' },
  { key: 'headersTimeoutMs', env: 'SERVICE_HEADERS_TIMEOUT_MS', flag: '--headers-timeout-ms', kind: 'int', default: 10_000, min: 100, doc: 'A client must send its request headers within this time (408 otherwise)' },
  { key: 'requestTimeoutMs', env: 'SERVICE_REQUEST_TIMEOUT_MS', flag: '--request-timeout-ms', kind: 'int', default: 30_000, min: 100, doc: 'A client must send its whole request, body included, within this time (408 otherwise); answers may stream longer' },
  { key: 'lingerMs', env: 'SERVICE_LINGER_MS', flag: '--linger-ms', kind: 'int', default: 2_000, min: 0, doc: 'A connection closed after a request refused before its body was read (413, 401) keeps reading and discarding what its client still sends for at most this long, so the client or proxy reads the answer instead of a reset' },
  { key: 'maxConnectionsPerAddress', env: 'SERVICE_MAX_CONNECTIONS_PER_ADDRESS', flag: '--max-connections-per-address', kind: 'int', default: 256, min: 0, doc: 'Open connections one client address may hold; more are closed at once (0: no limit; behind a proxy every client shares its address)' },
  { key: 'sseMaxBufferedBytes', env: 'SERVICE_SSE_MAX_BUFFERED_BYTES', flag: '--sse-max-buffered-bytes', kind: 'int', default: 1_048_576, min: 1024, doc: 'Output waiting for a client that reads an SSE stream too slowly; beyond it the connection is closed (a session stream can be resumed)' },
  { key: 'signInFreeAttempts', env: 'SERVICE_SIGN_IN_FREE_ATTEMPTS', flag: '--sign-in-free-attempts', kind: 'int', default: 5, min: 1, doc: 'Failed sign-ins of one account before each further attempt must wait (a delay doubling from SERVICE_SIGN_IN_DELAY_MS)' },
  { key: 'signInAddressFreeAttempts', env: 'SERVICE_SIGN_IN_ADDRESS_FREE_ATTEMPTS', flag: '--sign-in-address-free-attempts', kind: 'int', default: 20, min: 1, doc: 'Failed sign-ins from one client address, whatever the account, before it must wait likewise' },
  { key: 'signInDelayMs', env: 'SERVICE_SIGN_IN_DELAY_MS', flag: '--sign-in-delay-ms', kind: 'int', default: 1_000, min: 1, doc: 'First wait after the free sign-in attempts; each further failure doubles it' },
  { key: 'signInMaxDelayMs', env: 'SERVICE_SIGN_IN_MAX_DELAY_MS', flag: '--sign-in-max-delay-ms', kind: 'int', default: 900_000, min: 1, doc: 'Longest wait between sign-in attempts (15 min); a success clears the account' },
  { key: 'authorizeRateLimit', env: 'SERVICE_AUTHORIZE_RATE_LIMIT', flag: '--authorize-rate-limit', kind: 'int', default: 60, min: 1, doc: '`GET /oauth/authorize` requests per window per IP' },
  { key: 'authorizeRateLimitWindowMs', env: 'SERVICE_AUTHORIZE_RATE_LIMIT_WINDOW_MS', flag: '--authorize-rate-limit-window-ms', kind: 'int', default: 60_000, min: 1, doc: 'Window of the `/oauth/authorize` limit (1 min)' },
  { key: 'pendingAuthorizationsPerAddress', env: 'SERVICE_PENDING_AUTHORIZATIONS_PER_ADDRESS', flag: '--pending-authorizations-per-address', kind: 'int', default: 20, min: 1, doc: 'Authorizations started from one IP and not yet answered or expired (further ones are refused until some end)' },
  { key: 'signInProviders', env: 'SERVICE_SIGN_IN_PROVIDERS', flag: '--sign-in-providers', kind: 'providers', default: [], doc: 'OpenID Connect providers people sign in through, JSON `[{"name", "title", "issuer", "clientId", "clientSecretEnv", "provision": {…}}]` (best in the config file; docs/signing-in.md)' },
  { key: 'passwordSignIn', env: 'SERVICE_PASSWORD_SIGN_IN', flag: '--password-sign-in', kind: 'string', default: 'on', doc: '`on`, or `off`: the sign-in pages show no password form and refuse password posts (needs at least one sign-in provider)' },
  { key: 'signInFlowTtlMs', env: 'SERVICE_SIGN_IN_FLOW_TTL_MS', flag: '--sign-in-flow-ttl-ms', kind: 'int', default: 600_000, min: 1, doc: 'How long a sign-in started at an identity provider may take to come back (10 min)' },
  { key: 'idTokenClockToleranceMs', env: 'SERVICE_ID_TOKEN_CLOCK_TOLERANCE_MS', flag: '--id-token-clock-tolerance-ms', kind: 'int', default: 30_000, min: 0, max: 300_000, doc: 'Clock difference allowed with an identity provider when checking an ID token\'s `exp` and `iat` (30 s)' },
  { key: 'upstreamTimeoutMs', env: 'SERVICE_UPSTREAM_TIMEOUT_MS', flag: '--upstream-timeout-ms', kind: 'int', default: 10_000, min: 1, doc: 'How long a request to an identity provider (discovery, keys, token endpoint) may take (10 s)' },
  { key: 'upstreamDiscoveryTtlMs', env: 'SERVICE_UPSTREAM_DISCOVERY_TTL_MS', flag: '--upstream-discovery-ttl-ms', kind: 'int', default: 3_600_000, min: 1, doc: 'How long an identity provider\'s discovery document is reused before it is fetched again (1 h; a failed fetch is retried at the next sign-in)' },
  { key: 'trustedIssuers', env: 'SERVICE_TRUSTED_ISSUERS', flag: '--trusted-issuers', kind: 'trustedIssuers', default: [], doc: 'Enterprise identity providers whose identity assertions (ID-JAG) `/oauth/token` exchanges for access tokens, JSON `[{"issuer", "jwksUri", "algorithms"?, "clients"?, "organization"?}]` (best in the config file; docs/signing-in.md); none: the jwt-bearer grant is off' },
  { key: 'assertionMaxLifetimeMs', env: 'SERVICE_ASSERTION_MAX_LIFETIME_MS', flag: '--assertion-max-lifetime-ms', kind: 'int', default: 600_000, min: 1000, doc: 'Longest lifetime (`exp` − `iat`) of an identity assertion accepted at the token endpoint (10 min)' },
  { key: 'assertionClockToleranceMs', env: 'SERVICE_ASSERTION_CLOCK_TOLERANCE_MS', flag: '--assertion-clock-tolerance-ms', kind: 'int', default: 60_000, min: 0, max: 300_000, doc: 'Clock difference allowed with an identity provider when checking an assertion\'s `exp`, `iat` and `nbf` (60 s)' },
  { key: 'jwksTimeoutMs', env: 'SERVICE_JWKS_TIMEOUT_MS', flag: '--jwks-timeout-ms', kind: 'int', default: 5_000, min: 1, doc: 'How long fetching a trusted issuer\'s signing keys may take (5 s)' },
  { key: 'jwksCooldownMs', env: 'SERVICE_JWKS_COOLDOWN_MS', flag: '--jwks-cooldown-ms', kind: 'int', default: 30_000, min: 0, doc: 'Shortest time between two fetches of an issuer\'s signing keys when an assertion names a key not yet known (30 s)' },
  { key: 'jwksCacheMs', env: 'SERVICE_JWKS_CACHE_MS', flag: '--jwks-cache-ms', kind: 'int', default: 600_000, min: 1, doc: 'How long an issuer\'s signing keys are used before they are fetched again (10 min)' },
  { key: 'clientDocuments', env: 'SERVICE_CLIENT_DOCUMENTS', flag: '--client-documents', kind: 'string', default: 'all', doc: 'Client metadata documents (an `https` URL as `client_id`): `all` fetches any public host\'s, `listed` only those of SERVICE_CLIENT_DOCUMENT_HOSTS, `off` none' },
  { key: 'clientDocumentHosts', env: 'SERVICE_CLIENT_DOCUMENT_HOSTS', flag: '--client-document-hosts', kind: 'list', default: [], doc: 'With SERVICE_CLIENT_DOCUMENTS=listed: the hosts whose documents are fetched, exactly as in the URL (lowercase, `:port` when not 443), e.g. `vscode.dev,claude.ai`' },
  { key: 'clientDocumentsUnsafeLoopbackHosts', env: 'SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS', flag: '--client-documents-unsafe-loopback-hosts', kind: 'list', default: [], doc: 'UNSAFE, for tests only: host names (e.g. `localhost`) whose documents may be fetched from a loopback address (and only from one); logged as a warning at start' },
  { key: 'clientDocumentTimeoutMs', env: 'SERVICE_CLIENT_DOCUMENT_TIMEOUT_MS', flag: '--client-document-timeout-ms', kind: 'int', default: 2_500, min: 1, doc: 'A client metadata document must be fetched whole (name lookup, connection, headers and body) within this time (2.5 s)' },
  { key: 'clientDocumentMaxBytes', env: 'SERVICE_CLIENT_DOCUMENT_MAX_BYTES', flag: '--client-document-max-bytes', kind: 'int', default: 5_120, min: 256, max: 1_048_576, doc: 'Largest client metadata document accepted, counted while it arrives (5 KiB)' },
  { key: 'clientDocumentCacheEntries', env: 'SERVICE_CLIENT_DOCUMENT_CACHE_ENTRIES', flag: '--client-document-cache-entries', kind: 'int', default: 1_000, min: 1, doc: 'Client metadata documents (and failed fetches) kept in memory; the least recently used is dropped first' },
  { key: 'clientDocumentCacheMinMs', env: 'SERVICE_CLIENT_DOCUMENT_CACHE_MIN_MS', flag: '--client-document-cache-min-ms', kind: 'int', default: 300_000, min: 0, doc: 'Shortest time a fetched document is reused, whatever its Cache-Control says (5 min)' },
  { key: 'clientDocumentCacheMaxMs', env: 'SERVICE_CLIENT_DOCUMENT_CACHE_MAX_MS', flag: '--client-document-cache-max-ms', kind: 'int', default: 86_400_000, min: 0, doc: 'Longest time a fetched document is reused before it is fetched again (24 h)' },
  { key: 'clientDocumentFailureCacheMs', env: 'SERVICE_CLIENT_DOCUMENT_FAILURE_CACHE_MS', flag: '--client-document-failure-cache-ms', kind: 'int', default: 30_000, min: 0, doc: 'How long a failed fetch or a refused document is answered from memory before the URL is fetched again (30 s)' },
  { key: 'clientDocumentFetchLimit', env: 'SERVICE_CLIENT_DOCUMENT_FETCH_LIMIT', flag: '--client-document-fetch-limit', kind: 'int', default: 20, min: 1, doc: 'Client metadata document fetches per window per host (cached answers do not count)' },
  { key: 'clientDocumentFetchLimitWindowMs', env: 'SERVICE_CLIENT_DOCUMENT_FETCH_LIMIT_WINDOW_MS', flag: '--client-document-fetch-limit-window-ms', kind: 'int', default: 60_000, min: 1, doc: 'Window of the client metadata document fetch limit (1 min)' },
]

export interface Config extends RawConfig {
  /** Origin of baseUrl, e.g. `http://127.0.0.1:3000`. */
  baseOrigin: string
}

/**
 * A setting that stops the start (exit code 2): its message, a sentence naming the setting, is shown to the operator
 * as it is, so it never carries a credential a setting holds (lib/mask-credentials.ts), whoever wrote it.
 */
export class ConfigError extends Error {
  override name = 'ConfigError'

  constructor(message: string, options?: { cause?: unknown }) {
    super(maskCredentials(message), options)
  }
}

/** What SERVICE_DATABASE names (lib/database-url.ts); a ConfigError when it can be used as none. */
export function databaseTarget(database: string): DatabaseTarget {
  const target = classifyDatabase(database)
  if (target.kind === 'unusable') throw new ConfigError(target.unusable)
  return target
}

/**
 * The env key of a PostgreSQL database is given, never defaulted: a URL has no folder to keep an env.key beside, and
 * every process serving the database must seal with the same key (docs/decisions/storage.md).
 */
export const POSTGRES_NEEDS_ENV_KEY = 'SERVICE_DATABASE is a PostgreSQL database: set SERVICE_ENV_KEY (or SERVICE_ENV_KEY_FILE) to the key that encrypts env var values, the same for every process that serves it (`openssl rand -base64 32`)'

function parseValue(s: Setting, raw: unknown, source: string, env: NodeJS.ProcessEnv): unknown {
  const where = source === s.env ? s.env : `${source} (${s.env})`
  switch (s.kind) {
    case 'int': {
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : NaN
      if (!Number.isSafeInteger(n)) throw new ConfigError(`${where} must be an integer, got ${JSON.stringify(raw)}`)
      if (s.min !== undefined && n < s.min) throw new ConfigError(`${where} must be at least ${s.min}, got ${n}`)
      if (s.max !== undefined && n > s.max) throw new ConfigError(`${where} must be at most ${s.max}, got ${n}`)
      return n
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw
      const v = String(raw).trim().toLowerCase()
      if (['1', 'true', 'yes', 'on'].includes(v)) return true
      if (['0', 'false', 'no', 'off', ''].includes(v)) return false
      throw new ConfigError(`${where} must be true or false, got ${JSON.stringify(raw)}`)
    }
    case 'list': {
      if (Array.isArray(raw)) return raw.map(String)
      return String(raw).split(',').map((x) => x.trim()).filter(Boolean)
    }
    case 'level': {
      const v = String(raw).trim().toLowerCase()
      if (!LEVELS.includes(v)) throw new ConfigError(`${where} must be one of ${LEVELS.join(', ')}, got ${JSON.stringify(raw)}`)
      return v
    }
    case 'url': {
      const v = String(raw).trim()
      if (v === '') return ''
      let u: URL
      try {
        u = new URL(v)
      } catch {
        throw new ConfigError(`${where} must be an absolute http(s) URL, got ${JSON.stringify(raw)}`)
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${where} must use http or https, got ${JSON.stringify(raw)}`)
      if (u.search || u.hash || u.username || u.password) throw new ConfigError(`${where} must not contain a query, fragment or credentials`)
      return v.replace(/\/+$/, '')
    }
    case 'pipelines':
      return parsePipelines(raw, where)
    case 'proxy':
      return parseTrustProxy(raw, where)
    case 'providers':
      try {
        return parseSignInProviders(raw, env, where)
      } catch (err) {
        if (err instanceof ProviderConfigProblem) throw new ConfigError(err.message)
        throw err
      }
    case 'trustedIssuers':
      try {
        return parseTrustedIssuers(raw)
      } catch (err) {
        throw new ConfigError(`${where}: ${(err as Error).message}`)
      }
    default:
      if (typeof raw !== 'string') throw new ConfigError(`${where} must be a string, got ${JSON.stringify(raw)}`)
      return raw
  }
}

const PIPELINE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/

function parsePipelines(raw: unknown, where: string): Record<string, PipelineConfig> {
  const badJson = () => new ConfigError(`${where} must be JSON like {"default": {"argv": ["./deploy.sh"]}}`)
  const value = jsonSetting(raw, badJson)
  if (value === undefined) throw badJson()
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(`${where} must be an object of pipelines by name`)
  const out: Record<string, PipelineConfig> = {}
  for (const [name, p] of Object.entries(value as Record<string, unknown>)) {
    if (!PIPELINE_NAME.test(name)) throw new ConfigError(`${where}: pipeline name ${JSON.stringify(name)} must be 1-64 characters of a-z 0-9 _ -`)
    const argv = (p as { argv?: unknown } | null)?.argv
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === 'string' && a !== '')) {
      throw new ConfigError(`${where}: pipeline ${name} needs "argv", a non-empty array of strings`)
    }
    const cwd = (p as { cwd?: unknown }).cwd
    if (cwd !== undefined && typeof cwd !== 'string') throw new ConfigError(`${where}: pipeline ${name} "cwd" must be a string`)
    out[name] = { argv: [...argv] as string[], ...(cwd !== undefined ? { cwd } : {}) }
  }
  return out
}

/** Parses `--flag value` and `--flag=value` pairs; unknown flags are an error so typos do not pass silently. */
export function parseFlags(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {}
  const known = new Map(SETTINGS.map((s) => [s.flag, s]))
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const eq = arg.indexOf('=')
    const name = eq === -1 ? arg : arg.slice(0, eq)
    const setting = known.get(name)
    if (!setting) {
      const close = closeMatch(name, [...known.keys()])
      throw new ConfigError(`Unknown option ${name}${close ? `; did you mean ${close}?` : ''} (the options are the settings' flags of the configuration table)`)
    }
    let value: string | undefined
    if (eq !== -1) value = arg.slice(eq + 1)
    else if ((setting.kind === 'bool' || setting.kind === 'proxy') && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--'))) value = 'true'
    else value = argv[++i]
    if (value === undefined) throw new ConfigError(`Option ${name} needs a value`)
    out[setting.key] = value
  }
  return out
}

export function loadConfig(options: {
  env?: NodeJS.ProcessEnv
  argv?: readonly string[]
  overrides?: Partial<RawConfig>
  /**
   * False for what never reads or writes an env var value (the command line's lists, keys, users, members): a
   * PostgreSQL database then needs no SERVICE_ENV_KEY. The server and `env-key` need it (default true).
   */
  requireEnvKey?: boolean
} = {}): Config {
  const env = options.env ?? process.env
  const flags = parseFlags(options.argv ?? [])
  // Same precedence as every other setting: flag > override > environment.
  const configPath = flags.configFile ?? options.overrides?.configFile ?? env.SERVICE_CONFIG ?? ''
  let fileValues: Record<string, unknown> = {}
  if (configPath) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(configPath, 'utf8'))
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('the top level must be an object')
      fileValues = parsed as Record<string, unknown>
    } catch (err) {
      throw new ConfigError(`Config file ${configPath} (SERVICE_CONFIG) cannot be read: ${(err as Error).message}`)
    }
    // A misspelt key would otherwise leave its setting at the default without a word.
    for (const key of Object.keys(fileValues)) {
      if (!SETTINGS.some((s) => s.key === key)) {
        throw new ConfigError(`Config file ${configPath} (SERVICE_CONFIG) has an unknown key ${JSON.stringify(key)}; did you mean ${JSON.stringify(closestSetting(key))}? (keys are the settings' names in camelCase)`)
      }
    }
  }
  const raw: Record<string, unknown> = {}
  for (const s of SETTINGS) {
    let value: unknown = s.default
    let source = 'default'
    if (s.key in fileValues) [value, source] = [fileValues[s.key], `config file key "${s.key}"`]
    if (env[s.env] !== undefined && env[s.env] !== '') [value, source] = [env[s.env], 'environment variable']
    if (options.overrides && options.overrides[s.key] !== undefined) [value, source] = [options.overrides[s.key], 'override']
    if (flags[s.key] !== undefined) [value, source] = [flags[s.key], `option ${s.flag}`]
    // Defaults are copied so no caller can mutate the shared table (allowedOrigins is an array).
    raw[s.key] = source === 'default' ? (Array.isArray(value) ? [...value] : value) : parseValue(s, value, source === 'environment variable' ? s.env : source, env)
  }
  const cfg = raw as unknown as RawConfig
  cfg.configFile = configPath
  if (cfg.bootstrapApiKey && !/^service_mcp_[A-Za-z0-9_-]{32,}$/.test(cfg.bootstrapApiKey)) {
    throw new ConfigError('SERVICE_BOOTSTRAP_API_KEY must be service_mcp_ followed by at least 32 characters of [A-Za-z0-9_-]')
  }
  if (cfg.bootstrapPassword && cfg.bootstrapPassword.length < 8) {
    throw new ConfigError('SERVICE_BOOTSTRAP_PASSWORD must be at least 8 characters long')
  }
  if (cfg.bootstrapPassword && cfg.bootstrapPasswordHash) {
    throw new ConfigError('SERVICE_BOOTSTRAP_PASSWORD and SERVICE_BOOTSTRAP_PASSWORD_HASH are both set: set one')
  }
  if (cfg.bootstrapPasswordHash && !isPasswordHash(cfg.bootstrapPasswordHash)) {
    throw new ConfigError('SERVICE_BOOTSTRAP_PASSWORD_HASH must be a scrypt hash as the users table stores it (scrypt$16384$8$1$<salt>$<key>, N at least 16384)')
  }
  if (!/^[^@\s]+@[^@\s]+$/.test(cfg.bootstrapEmail)) throw new ConfigError(`SERVICE_BOOTSTRAP_EMAIL is not an email address: ${JSON.stringify(cfg.bootstrapEmail)}`)
  for (const origin of cfg.allowedOrigins) {
    let u: URL | undefined
    try {
      u = new URL(origin)
    } catch {
      u = undefined
    }
    if (!u || u.origin !== origin) throw new ConfigError(`SERVICE_ALLOWED_ORIGINS entry ${JSON.stringify(origin)} is not an origin like https://app.example.com`)
  }
  for (const scheme of cfg.redirectSchemes) {
    // A private-use scheme is a reverse domain name or a product name; the web and dangerous schemes are never one.
    if (!/^[a-z][a-z0-9+.-]*$/.test(scheme) || ['http', 'https', ...FORBIDDEN_REDIRECT_SCHEMES].includes(scheme)) {
      throw new ConfigError(`SERVICE_REDIRECT_SCHEMES entry ${JSON.stringify(scheme)} is not a private-use scheme name such as cursor or com.example.app (lowercase, no "://")`)
    }
  }
  checkClientDocumentSettings(cfg)
  // Nothing new could ever sign in through OAuth: docs/decisions/oauth.md says why this stops the start.
  if (!cfg.registration && cfg.clientDocuments === 'off') {
    throw new ConfigError('SERVICE_REGISTRATION=off with SERVICE_CLIENT_DOCUMENTS=off leaves OAuth clients no way to identify themselves: turn one of them on (SERVICE_CLIENT_DOCUMENTS=listed with SERVICE_CLIENT_DOCUMENT_HOSTS accepts only the clients you name)')
  }
  if (cfg.headersTimeoutMs > cfg.requestTimeoutMs) {
    throw new ConfigError(`SERVICE_HEADERS_TIMEOUT_MS (${cfg.headersTimeoutMs}) must not exceed SERVICE_REQUEST_TIMEOUT_MS (${cfg.requestTimeoutMs}): the whole request includes its headers`)
  }
  if (!(TRACING_MODES as readonly string[]).includes(cfg.tracing)) {
    throw new ConfigError(`SERVICE_TRACING must be ${TRACING_MODES.join(', ')}, got ${JSON.stringify(cfg.tracing)}`)
  }
  if (cfg.profile !== '' && !(PROFILES as readonly string[]).includes(cfg.profile)) {
    throw new ConfigError(`SERVICE_PROFILE must be ${PROFILES.join(' or ')} (or empty for none), got ${JSON.stringify(cfg.profile)}`)
  }
  if (cfg.profile === 'conformance') {
    // No authentication: reachable from this machine only, whatever else the settings say.
    if (!isLoopbackHost(cfg.host)) {
      throw new ConfigError(`SERVICE_PROFILE conformance serves without authentication, so it listens only on a loopback address (127.0.0.1, ::1 or localhost), not SERVICE_HOST ${JSON.stringify(cfg.host)}`)
    }
    if (cfg.baseUrl && !isLoopbackHost(new URL(cfg.baseUrl).hostname)) {
      throw new ConfigError(`SERVICE_PROFILE conformance serves without authentication, so its base address must be a loopback one, not SERVICE_BASE_URL ${JSON.stringify(cfg.baseUrl)}`)
    }
  }
  // A URL other than PostgreSQL's is not a file name either: taken as one, it would create folders named after its scheme.
  const database = databaseTarget(cfg.database)
  if (database.kind === 'postgres' && !cfg.envKey && !cfg.envKeyFile && options.requireEnvKey !== false) {
    throw new ConfigError(POSTGRES_NEEDS_ENV_KEY)
  }
  if (cfg.redisUrl && !/^rediss?:\/\//i.test(cfg.redisUrl)) {
    throw new ConfigError(`SERVICE_REDIS_URL ${JSON.stringify(cfg.redisUrl)} must be a redis:// or rediss:// URL`)
  }
  // Several processes share what one database holds: a SQLite file is one process's (its lock file says so).
  if (cfg.redisUrl && database.kind !== 'postgres') {
    throw new ConfigError('SERVICE_REDIS_URL lets several processes serve one database, which must then be PostgreSQL (SERVICE_DATABASE=postgres://…): a SQLite file is served by one process')
  }
  if (cfg.envKey && !isEnvKey(cfg.envKey)) throw new ConfigError('SERVICE_ENV_KEY must be 32 bytes encoded as base64 or base64url (e.g. `openssl rand -base64 32`)')
  if (cfg.pipelines === null) {
    cfg.pipelines = { default: { argv: [process.execPath, join(packageRoot(), 'scripts', 'pipelines', 'example.mjs')] } }
  }
  if (cfg.passwordSignIn !== 'on' && cfg.passwordSignIn !== 'off') {
    throw new ConfigError(`SERVICE_PASSWORD_SIGN_IN must be on or off, got ${JSON.stringify(cfg.passwordSignIn)}`)
  }
  // Nobody could sign in at all (docs/decisions/single-sign-on.md).
  if (cfg.passwordSignIn === 'off' && cfg.signInProviders.length === 0) {
    throw new ConfigError('SERVICE_PASSWORD_SIGN_IN is off but no sign-in provider is configured (signInProviders in the config file): nobody could sign in')
  }
  if (!cfg.baseUrl && !isLoopbackAddress(cfg.host)) {
    // The default base address would be this host as written (0.0.0.0 is no address at all), and OAuth clients on other
    // machines would be sent there.
    throw new ConfigError(`SERVICE_HOST ${JSON.stringify(cfg.host)} is not a loopback address, so clients reach the server by another address: set SERVICE_BASE_URL to the address they use (e.g. https://mcp.example.com, or http://<this machine's name>:${cfg.port}); it is the address OAuth discovery and the pages advertise`)
  }
  const hostForUrl = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host
  if (!cfg.baseUrl) cfg.baseUrl = `http://${hostForUrl}:${cfg.port}`
  return { ...cfg, baseOrigin: new URL(cfg.baseUrl).origin }
}

/**
 * The client metadata document settings (docs/decisions/client-metadata-documents.md): a known policy, a host list
 * that `listed` cannot do without, and host names in the one form a URL's host is compared in.
 */
function checkClientDocumentSettings(cfg: RawConfig): void {
  if (!(CLIENT_DOCUMENT_POLICIES as readonly string[]).includes(cfg.clientDocuments)) {
    throw new ConfigError(`SERVICE_CLIENT_DOCUMENTS must be ${CLIENT_DOCUMENT_POLICIES.join(', ')}, got ${JSON.stringify(cfg.clientDocuments)}`)
  }
  if (cfg.clientDocuments === 'listed' && cfg.clientDocumentHosts.length === 0) {
    throw new ConfigError('SERVICE_CLIENT_DOCUMENTS=listed fetches the documents of the hosts in SERVICE_CLIENT_DOCUMENT_HOSTS, which is empty: name the hosts (e.g. vscode.dev), or choose all or off')
  }
  for (const host of cfg.clientDocumentHosts) {
    if (urlPart(host, 'host') !== host) {
      throw new ConfigError(`SERVICE_CLIENT_DOCUMENT_HOSTS entry ${JSON.stringify(host)} is not a host as a URL shows it: lowercase, no scheme or path, :port only when not 443 (e.g. vscode.dev or docs.example.com:8443)`)
    }
  }
  for (const name of cfg.clientDocumentsUnsafeLoopbackHosts) {
    if (urlPart(name, 'hostname') !== name) {
      throw new ConfigError(`SERVICE_CLIENT_DOCUMENTS_UNSAFE_LOOPBACK_HOSTS entry ${JSON.stringify(name)} is not a host name as a URL shows it: lowercase, no scheme, port or path (e.g. localhost)`)
    }
  }
  if (cfg.clientDocumentCacheMinMs > cfg.clientDocumentCacheMaxMs) {
    throw new ConfigError(`SERVICE_CLIENT_DOCUMENT_CACHE_MIN_MS (${cfg.clientDocumentCacheMinMs}) must not exceed SERVICE_CLIENT_DOCUMENT_CACHE_MAX_MS (${cfg.clientDocumentCacheMaxMs})`)
  }
}

/** The host (with a port other than 443) or host name of `https://<value>/`, or null when that is no URL. */
function urlPart(value: string, part: 'host' | 'hostname'): string | null {
  if (/[/?#@\\\s]/.test(value)) return null
  try {
    return new URL(`https://${value}/`)[part]
  } catch {
    return null
  }
}

/** Loopback only: 127.0.0.0/8, ::1 or localhost (a default base address `http://{host}:{port}` works only for these). */
function isLoopbackAddress(host: string): boolean {
  return isLoopbackHost(host) || (isIP(host) === 4 && host.startsWith('127.'))
}

/** The setting name closest to a config-file key that is none (for "did you mean"). */
function closestSetting(key: string): string {
  const norm = (x: string) => x.toLowerCase().replace(/[^a-z0-9]/g, '')
  const wanted = norm(key)
  // The environment variable or the flag written instead of the key.
  const named = SETTINGS.find((s) => [s.key, s.env.replace(/^SERVICE_/, ''), s.flag.replace(/^--/, '')].some((form) => norm(form) === wanted))
  if (named) return named.key
  let best: string = SETTINGS[0]!.key
  let bestDistance = Infinity
  for (const s of SETTINGS) {
    const d = editDistance(wanted, norm(s.key))
    if (d < bestDistance) [best, bestDistance] = [s.key, d]
  }
  return best
}

/**
 * At server start (not for the admin commands, which run no pipeline): every configured pipeline's `cwd` is a folder,
 * so that a typo is a refusal to start rather than a failed deployment later.
 */
export function checkPipelineFolders(config: Pick<Config, 'pipelines'>): void {
  for (const [name, pipeline] of Object.entries(config.pipelines)) {
    if (pipeline.cwd === undefined) continue
    const shown = `${JSON.stringify(pipeline.cwd)}${isAbsolute(pipeline.cwd) ? '' : ` (${resolve(pipeline.cwd)})`}`
    let folder: boolean
    try {
      folder = statSync(pipeline.cwd).isDirectory()
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      throw new ConfigError(`SERVICE_PIPELINES: pipeline ${name} has "cwd" ${shown}, which ${code === 'ENOENT' ? 'does not exist' : `cannot be used (${code})`}`)
    }
    if (!folder) throw new ConfigError(`SERVICE_PIPELINES: pipeline ${name} has "cwd" ${shown}, which is not a folder`)
  }
}

/**
 * Once the real port is known (listening on port 0), a default base URL follows it. Consumers read `config.baseUrl`
 * at request time, so the object is updated in place.
 */
export function adoptListeningPort(config: Config, port: number, explicitBaseUrl: boolean): void {
  const previous = config.port
  config.port = port
  if (explicitBaseUrl || previous === port) return
  const u = new URL(config.baseUrl)
  u.port = String(port)
  config.baseUrl = u.toString().replace(/\/+$/, '')
  config.baseOrigin = u.origin
}
