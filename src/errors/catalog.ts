/**
 * The one error catalog. Every failure the server reports is an entry here, rendered by `render.ts` into one of
 * four shapes: the service error body (HTTP on /mcp), the OAuth body (/oauth/*), a JSON-RPC error, or a tool result.
 * Codes are part of the interface: a code never changes meaning once shipped. Clients match on `code`.
 *
 * `status` is the HTTP status when the error ends an HTTP exchange; `rpc` is the JSON-RPC code when it is rendered as
 * a JSON-RPC error; `oauth` is the RFC 6749 code for the OAuth renderer; `expose: false` masks it as INTERNAL_ERROR.
 */
export interface ErrorSpec {
  readonly status: number
  readonly message: string
  readonly action: string
  readonly rpc?: number
  /** The JSON-RPC code in sessions of the 2025 revisions, when theirs differs from 2026-07-28's (`rpc`). */
  readonly rpcInSessions?: number
  readonly oauth?: string
  /** false: masked as INTERNAL_ERROR; true: shown even with a 5xx status (a deliberate 503); default: shown below 500. */
  readonly expose?: boolean
  /**
   * The JSON-RPC rendering puts `details` at the top of `data` (beside `code` and `action`) instead of under
   * `data.details`: for the 2026-07-28 errors whose `data` the spec defines (`supported`, `requiredCapabilities`).
   */
  readonly rpcDataIsDetails?: boolean
}

export const catalog = {
  /** Authentication and authorization on /mcp */
  INVALID_TOKEN: {
    status: 401,
    message: 'The bearer token is missing or invalid',
    action: 'Send Authorization: Bearer <access token or service_mcp_ API key>; obtain a token through OAuth if needed',
    oauth: 'invalid_token',
  },
  TOKEN_EXPIRED: {
    status: 401,
    message: 'The access token has expired',
    action: 'Refresh the token, then initialize a new session',
    oauth: 'invalid_token',
  },
  TOKEN_REVOKED: {
    status: 401,
    message: 'The token or API key has been revoked',
    action: 'Authorize again (or create a new API key) and initialize a new session',
    oauth: 'invalid_token',
  },
  INSUFFICIENT_SCOPE: {
    status: 403,
    message: 'The token lacks the scope this operation needs',
    action: 'Authorize again requesting the scope named in WWW-Authenticate',
    oauth: 'insufficient_scope',
  },
  /** /metrics: its credential is the operator's SERVICE_METRICS_TOKEN, never an access token or API key. */
  METRICS_TOKEN_REQUIRED: {
    status: 401,
    message: 'GET /metrics needs Authorization: Bearer <SERVICE_METRICS_TOKEN>',
    action: 'Send Authorization: Bearer <the value of SERVICE_METRICS_TOKEN> (in Prometheus: authorization.credentials of the scrape job); OAuth tokens and API keys are not accepted here',
  },

  /** Transport */
  SESSION_NOT_FOUND: {
    status: 404,
    message: 'The session has expired or is invalid',
    action: 'Initialize a new session (send initialize without Mcp-Session-Id)',
    rpc: -32001,
  },
  FORBIDDEN_ORIGIN: {
    status: 403,
    message: 'The Origin of this request is not allowed',
    action: 'Call from an allowed origin, or ask the operator to add it to SERVICE_ALLOWED_ORIGINS',
  },
  NOT_ACCEPTABLE: {
    status: 406,
    message: 'The Accept header must name application/json or text/event-stream',
    action: 'Send Accept: application/json, text/event-stream',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    message: 'The request body must be application/json',
    action: 'Send Content-Type: application/json',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    message: 'The request body exceeds the transport limit',
    action: 'Send a smaller request',
  },
  UNSUPPORTED_PROTOCOL_VERSION: {
    status: 400,
    message: 'The MCP-Protocol-Version header names an unsupported revision or differs from the session revision',
    action: 'Send the protocol version negotiated at initialize, or omit the header; a 2026-07-28 request uses a revision of data.supported',
    rpc: -32022,
    rpcDataIsDetails: true,
  },
  HEADER_MISMATCH: {
    status: 400,
    message: 'The request headers do not match the request body',
    action: 'Send MCP-Protocol-Version, Mcp-Method and Mcp-Name, and the Mcp-Param-* headers the tool declares, with the values of the body',
    rpc: -32020,
  },
  MISSING_CLIENT_CAPABILITY: {
    status: 400,
    message: 'This request needs a client capability it did not declare',
    action: 'Declare the capabilities of data.requiredCapabilities in io.modelcontextprotocol/clientCapabilities, then retry',
    rpc: -32021,
    rpcDataIsDetails: true,
  },
  IDEMPOTENCY_CONFLICT: {
    status: 409,
    message: 'A call with this request id is still pending or running in this session',
    action: 'Wait for the first call to finish, then retry with the same id to get its result',
  },
  RATE_LIMITED: {
    status: 429,
    message: 'Too many requests',
    action: 'Wait for the number of seconds in Retry-After, then retry with the same request id',
    oauth: 'temporarily_unavailable',
  },
  REQUEST_TIMEOUT: {
    status: 408,
    message: 'The request was not received in time',
    action: 'Send the whole request (headers and body) without pausing',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    message: 'The request headers are too large',
    action: 'Send fewer or shorter headers',
  },
  /**
   * An HTTP 503 promises that nothing of the request ran, so proxies send it to another process, a POST included
   * (docs/deploy/nginx.conf): it ends an HTTP exchange only before anything ran (a stopping server's refusal, a session
   * that could not be stored). A call that had started gets it as a JSON-RPC error inside an HTTP 200, never resent.
   */
  SERVICE_UNAVAILABLE: {
    status: 503,
    message: 'The server cannot take this request right now',
    action: 'Retry after the number of seconds in Retry-After; if it persists, tell the operator (the database may be full or read-only)',
    expose: true,
  },
  NOT_FOUND: {
    status: 404,
    message: 'No such route',
    action: 'Check the method and path; the MCP endpoint is /mcp',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    message: 'This HTTP method is not allowed here',
    action: 'Use the methods listed in the Allow header',
  },
  BAD_REQUEST: {
    status: 400,
    message: 'The request is malformed',
    action: 'Fix the request as described in details',
  },

  /** JSON-RPC protocol errors */
  PARSE_ERROR: {
    status: 400,
    message: 'The body is not valid JSON',
    action: 'Send one JSON-RPC 2.0 message encoded as JSON',
    rpc: -32700,
  },
  INVALID_REQUEST: {
    status: 400,
    message: 'The body is not a valid JSON-RPC 2.0 message',
    action: 'Send a JSON-RPC 2.0 request, notification or response object',
    rpc: -32600,
  },
  METHOD_NOT_FOUND: {
    status: 200,
    message: 'Unknown method',
    action: 'Call a method this server supports: server/discover lists the capabilities of a 2026-07-28 request; initialize lists those of a session (docs/protocol.md lists the methods of each)',
    rpc: -32601,
  },
  INVALID_PARAMS: {
    status: 200,
    message: 'Invalid params',
    action: 'Fix the params listed in details and retry',
    rpc: -32602,
  },

  /** Tool failures (rendered as tool results with isError: true) */
  RESOURCE_NOT_FOUND: {
    status: 200,
    message: 'The resource does not exist',
    action: 'List the resources to find a valid id',
    // As a JSON-RPC error (resources/read of an unknown URI): -32602 in 2026-07-28 (SEP-2164), -32002 in sessions.
    rpc: -32602,
    rpcInSessions: -32002,
    // data.uri names the resource asked for (SEP-2164), beside code and action.
    rpcDataIsDetails: true,
  },
  PERMISSION_DENIED: {
    status: 200,
    message: 'Your role in this organization does not allow this operation',
    action: 'Ask an organization admin or owner for a role that allows it',
  },
  INVALID_ARGUMENTS: {
    status: 200,
    message: 'Invalid arguments',
    action: 'Fix the arguments named in the message and retry',
    rpc: -32602,
  },
  CONFLICT: {
    status: 200,
    message: 'The operation conflicts with the current state',
    action: 'Read the current state and retry with different values',
  },
  CAPABILITY_REQUIRED: {
    status: 200,
    message: 'This operation needs a client capability that was not declared',
    action: 'Use a client that declares the capability named in the message (elicitation, sampling, roots) and reads the SSE stream of the call',
  },
  INPUT_TIMEOUT: {
    status: 200,
    message: 'The client did not answer in time',
    action: 'Nothing was changed; send the request again and answer what it asks',
  },
  INPUT_REFUSED: {
    status: 200,
    message: 'The client refused to answer',
    action: 'Nothing was changed; send the request again when the client can answer',
  },
  ELICITATION_DENIED: {
    status: 200,
    message: 'The user declined the confirmation',
    action: 'Nothing was changed; call again if the user changes their mind',
  },
  ELICITATION_TIMEOUT: {
    status: 200,
    message: 'The confirmation was not answered in time',
    action: 'Nothing was changed; call again and answer the confirmation prompt',
  },
  OPERATION_CANCELLED: {
    status: 200,
    message: 'The operation was cancelled',
    action: 'Start it again if it is still needed',
  },
  /** A per-organization quota (src/limits/quotas.ts); details {quota, limit, usage, setting}. */
  QUOTA_EXCEEDED: {
    status: 200,
    message: 'A quota of your organization is reached',
    action: 'Free some of what the quota counts, as the message says, or ask the operator to raise the quota (service-mcp quotas set); the same call fails again until then',
  },
  OPERATION_FAILED: {
    status: 200,
    message: 'The operation failed',
    action: 'Read the logs of the operation, fix the cause and retry',
  },

  /** OAuth endpoints (rendered as {error, error_description}; `oauth` is the wire code) */
  OAUTH_INVALID_REQUEST: {
    status: 400,
    message: 'The request is missing a parameter, repeats one, or has a malformed value',
    action: 'Fix the parameter named in error_description',
    oauth: 'invalid_request',
  },
  OAUTH_INVALID_CLIENT: {
    status: 401,
    message: 'Client authentication failed: unknown client_id, or a secret sent by a public client',
    action: 'Register the client at /oauth/register and send only its client_id (no secret, PKCE instead)',
    oauth: 'invalid_client',
  },
  OAUTH_INVALID_GRANT: {
    status: 400,
    message: 'The authorization code or refresh token is invalid, expired, already used, or was issued to another client',
    action: 'Start the authorization again; keep the same code_verifier from challenge to exchange',
    oauth: 'invalid_grant',
  },
  OAUTH_UNAUTHORIZED_CLIENT: {
    status: 400,
    message: 'The client is not registered for this grant type',
    action: 'Register the client with the grant types it uses',
    oauth: 'unauthorized_client',
  },
  OAUTH_UNSUPPORTED_GRANT_TYPE: {
    status: 400,
    message: 'Only the authorization_code and refresh_token grant types are supported',
    action: 'Use grant_type=authorization_code or grant_type=refresh_token',
    oauth: 'unsupported_grant_type',
  },
  OAUTH_UNSUPPORTED_RESPONSE_TYPE: {
    status: 400,
    message: 'Only response_type=code is supported',
    action: 'Use the authorization code flow with PKCE',
    oauth: 'unsupported_response_type',
  },
  OAUTH_INVALID_SCOPE: {
    status: 400,
    message: 'The requested scope is unknown or exceeds what the client or grant allows',
    action: 'Request mcp:read and/or mcp:write, within the scope registered for the client',
    oauth: 'invalid_scope',
  },
  OAUTH_INVALID_TARGET: {
    status: 400,
    message: 'The resource parameter is missing or does not name this server',
    action: 'Send resource set to the server base address (or its /mcp endpoint), as published in the protected-resource metadata',
    oauth: 'invalid_target',
  },
  OAUTH_ACCESS_DENIED: {
    status: 403,
    message: 'The user denied the authorization request',
    action: 'Nothing was granted; start the authorization again if the user changes their mind',
    oauth: 'access_denied',
  },
  OAUTH_INVALID_REDIRECT_URI: {
    status: 400,
    message: 'A redirect URI is not acceptable',
    action: 'Register https URIs, http URIs on localhost, 127.0.0.1 or [::1], or a private-use scheme the operator allows; no fragments',
    oauth: 'invalid_redirect_uri',
  },
  OAUTH_INVALID_CLIENT_METADATA: {
    status: 400,
    message: 'The client metadata is invalid',
    action: 'Fix the field named in error_description',
    oauth: 'invalid_client_metadata',
  },
  /** SERVICE_REGISTRATION=off. RFC 7591 names no code for a closed endpoint: docs/decisions/oauth.md says why this one. */
  OAUTH_REGISTRATION_OFF: {
    status: 403,
    message: 'Dynamic client registration is turned off on this server',
    action: 'Identify the client with a Client ID Metadata Document: send the https URL of its document as client_id (the authorization server metadata says client_id_metadata_document_supported)',
    oauth: 'access_denied',
  },
  SIGN_IN_REQUIRED: {
    status: 401,
    message: 'Sign in to continue',
    action: 'Sign in with your email and password',
  },
  CSRF_FAILED: {
    status: 403,
    message: 'This form has expired or was not sent by this site',
    action: 'Reload the page and submit the form again',
  },
  PASSWORD_SIGN_IN_OFF: {
    status: 403,
    message: 'Password sign-in is turned off on this server: sign in through your identity provider',
    action: 'Use one of the "Sign in with …" buttons',
  },  /** Sign-in through an upstream OpenID Connect provider: shown as pages only (plugins/oauth/single-sign-on.ts). */
  SIGN_IN_PROVIDER_UNKNOWN: {
    status: 404,
    message: 'This server has no sign-in provider by that name.',
    action: 'Go back to the sign-in page and choose one of its buttons.',
  },
  SIGN_IN_LINK_UNUSABLE: {
    status: 400,
    message: 'The application\'s sign-in this page continued has expired, was finished, or was started in another browser.',
    action: 'Go back to the application and connect again.',
  },
  SIGN_IN_FLOW_UNKNOWN: {
    status: 400,
    message: 'The answer from your identity provider does not match a sign-in waiting here: it expired, was used already, or was not started here.',
    action: 'Start again from the sign-in page.',
  },
  SIGN_IN_FLOW_ELSEWHERE: {
    status: 400,
    message: 'The sign-in your identity provider answered was started in another browser, so it cannot finish here.',
    action: 'Start again from the sign-in page, in the browser you want to use.',
  },
  SIGN_IN_PROVIDER_ERROR: {
    status: 403,
    message: 'Your identity provider answered with an error instead of signing you in.',
    action: 'Start again from the sign-in page; if it happens again, tell your administrator what is written below.',
  },
  SIGN_IN_PROVIDER_UNREACHABLE: {
    status: 502,
    message: 'This server could not complete the sign-in with your identity provider.',
    action: 'Try again in a few minutes; if it keeps happening, tell your administrator what is written below.',
    expose: true,
  },
  SIGN_IN_TOKEN_REFUSED: {
    status: 403,
    message: 'Your identity provider\'s answer did not pass this server\'s checks, so you are not signed in.',
    action: 'Start again from the sign-in page; if it happens again, tell your administrator what is written below.',
  },
  SIGN_IN_NO_EMAIL: {
    status: 403,
    message: 'Your identity provider did not say which email address is yours, so this server cannot tell which account is yours.',
    action: 'Ask your administrator to release the email claim to this server.',
  },
  SIGN_IN_EMAIL_UNVERIFIED: {
    status: 403,
    message: 'Your identity provider says your email address is not verified, so this server does not trust it to find your account.',
    action: 'Verify your email address at your identity provider (or ask your administrator to), then sign in again.',
  },
  SIGN_IN_NOT_INVITED: {
    status: 403,
    message: 'You signed in at your identity provider, but this server has no account for you, and it creates none by itself.',
    action: 'Ask the server\'s operator to invite you (create your account with your email address), then sign in again.',
  },
  SIGN_IN_ACCOUNT_DISABLED: {
    status: 403,
    message: 'Your account on this server is disabled.',
    action: 'Ask the server\'s operator to enable it.',
  },
  SIGN_IN_EMAIL_TAKEN: {
    status: 403,
    message: 'The account with your email address is already tied to another person at this identity provider.',
    action: 'Ask the server\'s operator to sort out the two accounts.',
  },


  /** Catch-all. Never carries stack traces or SQL to the client. */
  INTERNAL_ERROR: {
    status: 500,
    message: 'Internal error',
    action: 'Retry later; if it persists, report the X-Request-Id to the operator',
    rpc: -32603,
    oauth: 'server_error',
  },
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof catalog

export function isErrorCode(value: string): value is ErrorCode {
  return Object.prototype.hasOwnProperty.call(catalog, value)
}
