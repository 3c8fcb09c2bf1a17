/**
 * docs/deploy/Caddyfile in front of a real server: Caddy (Debian's package) runs the recipe file itself, unprivileged,
 * with its site served in plain HTTP on a loopback port and the admin API off (test/helpers/proxy.ts). The same
 * checks as behind nginx: SSE unbuffered, the SDK through it, X-Forwarded-For believed only with
 * SERVICE_TRUST_PROXY and never as a client wrote it, discovery advertising SERVICE_BASE_URL, body sizes judged by
 * the server.
 */
import t from 'tap'
import {
  discoveryAdvertisesBaseUrl,
  findBinary,
  forwardedForOnlyWhenTrusted,
  heartbeatsComeThrough,
  sdkDeploysThrough,
  serverJudgesBodySize,
  startCaddy,
  type StartProxy,
} from '../helpers/proxy.js'

const CADDY = findBinary('caddy')
const skip = CADDY ? false : 'caddy is not installed (Debian: apt-get install caddy; .ci/run installs it)'
const start: StartProxy = (t, upstream) => startCaddy(t, CADDY!, upstream)

t.test('SSE: heartbeats reach the client while the stream is open', { skip }, (t) => heartbeatsComeThrough(t, start))

t.test('the official SDK client: session, calls, a confirmed deployment streamed as it runs', { skip }, (t) => sdkDeploysThrough(t, start))

t.test('X-Forwarded-For is believed only with SERVICE_TRUST_PROXY, and only as Caddy wrote it', { skip }, (t) => forwardedForOnlyWhenTrusted(t, start))

t.test('discovery behind Caddy advertises SERVICE_BASE_URL', { skip }, (t) => discoveryAdvertisesBaseUrl(t, start))

t.test('a body above SERVICE_MAX_BODY_BYTES reaches the server, which refuses it in its own shape', { skip }, (t) => serverJudgesBodySize(t, start))
