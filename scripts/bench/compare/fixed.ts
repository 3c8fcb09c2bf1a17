/**
 * The one tool every server of `npm run bench -- --compare` serves: the same name, title, description, schemas and
 * result everywhere, so the servers differ only in what they do around it. Plain data, no imports: the project's,
 * the SDK's and the bare Fastify server programs read it alike.
 *
 * The result is what this project emits for a tool with an outputSchema that returns an output object ("Adding your
 * own tools"): the output as JSON text and as `structuredContent`, `isError: false`. The complete JSON-RPC answer
 * (`{"jsonrpc":"2.0","id":1,"result":…}`) is about 2.7 KB.
 */

/** Apps the project's server adds to its organization at start, for the built-in service_apps_list (one page). */
export const SEEDED_APPS = 20

/**
 * The project's built-in tool of the `apps` scenario. The bare server answers it too when the harness hands it the
 * project's own result (COMPARE_BARE_APPS_RESULT, see server-bare.ts): the floor for the same, larger answer.
 */
export const APPS_TOOL_NAME = 'service_apps_list'

/** The environment variable naming the file with the project's service_apps_list `result` (JSON) for the bare server. */
export const BARE_APPS_RESULT_ENV = 'COMPARE_BARE_APPS_RESULT'

export const FIXED_TOOL_NAME = 'bench_services_list'
export const FIXED_TOOL_TITLE = 'List services'
export const FIXED_TOOL_DESCRIPTION = 'Lists the services of the benchmark: always the same ten entries.'

const NAMES = ['billing-api', 'checkout', 'search', 'auth-gateway', 'inventory', 'mailer', 'reports', 'media-cdn', 'payments', 'notifier']
const STATUSES = ['running', 'running', 'stopped', 'deploying'] as const
const REGIONS = ['eu-west-1', 'us-east-1', 'ap-south-1'] as const

export interface FixedService {
  id: string
  name: string
  status: (typeof STATUSES)[number]
  region: string
  updatedAt: string
}

export interface FixedOutput {
  [key: string]: unknown
  services: FixedService[]
  total: number
  next_cursor: string | null
}

/** The tool's output object: ten services, the total and an empty cursor. */
export const FIXED_OUTPUT: FixedOutput = {
  services: NAMES.map((name, i) => ({
    id: `svc_${String(i + 1).padStart(2, '0')}`,
    name,
    status: STATUSES[i % STATUSES.length]!,
    region: REGIONS[i % REGIONS.length]!,
    updatedAt: new Date(Date.UTC(2026, 0, 1 + i, 9, 30)).toISOString(),
  })),
  total: NAMES.length,
  next_cursor: null,
}

/** The tools/call `result` every server answers, in the key order this project writes it. */
export const FIXED_RESULT = {
  content: [{ type: 'text' as const, text: JSON.stringify(FIXED_OUTPUT) }],
  isError: false,
  structuredContent: FIXED_OUTPUT,
}

/** The tool's input: no arguments. */
export const FIXED_INPUT_SCHEMA = { type: 'object', properties: {}, additionalProperties: false } as const

/** The JSON Schema of FIXED_OUTPUT (the SDK server declares the same shape with zod). */
export const FIXED_OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    services: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          name: { type: 'string' },
          status: { type: 'string', enum: ['running', 'stopped', 'deploying'] },
          region: { type: 'string' },
          updatedAt: { type: 'string' },
        },
        required: ['id', 'name', 'status', 'region', 'updatedAt'],
        additionalProperties: false,
      },
    },
    total: { type: 'integer' },
    next_cursor: { type: ['string', 'null'] },
  },
  required: ['services', 'total', 'next_cursor'],
  additionalProperties: false,
} as const

/** What a tools/call of the fixed tool looks like on the wire, with a JSON-RPC id (a number or a JSON string). */
export function fixedCallBody(id: number | string, meta = ''): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"method":"tools/call","params":{"name":"${FIXED_TOOL_NAME}","arguments":{}${meta ? ',' + meta : ''}}}`
}
