/**
 * docs/deploy/nginx.conf in front of a real server: nginx (Debian's package) runs the recipe file itself, unprivileged,
 * on loopback ports with the TLS lines left out (test/helpers/proxy.ts). SSE passes unbuffered, the SDK works through
 * it, X-Forwarded-For is believed only with SERVICE_TRUST_PROXY and never as a client wrote it, discovery advertises
 * SERVICE_BASE_URL, and the server, not nginx, judges body sizes.
 */
import t from 'tap'
import { request } from 'undici'
import {
  discoveryAdvertisesBaseUrl,
  findBinary,
  forwardedForOnlyWhenTrusted,
  heartbeatsComeThrough,
  listeningPort,
  PUBLIC_HOST,
  sdkDeploysThrough,
  serverJudgesBodySize,
  startNginx,
  type StartProxy,
} from '../helpers/proxy.js'
import { startServer } from '../helpers/server.js'

const NGINX = findBinary('nginx')
const skip = NGINX ? false : 'nginx is not installed (Debian: apt-get install nginx; .ci/run installs it)'
const start: StartProxy = (t, upstream) => startNginx(t, NGINX!, upstream)

t.test('SSE: heartbeats reach the client while the stream is open', { skip }, (t) => heartbeatsComeThrough(t, start))

t.test('the official SDK client: session, calls, a confirmed deployment streamed as it runs', { skip }, (t) => sdkDeploysThrough(t, start))

t.test('X-Forwarded-For is believed only with SERVICE_TRUST_PROXY, and only as nginx wrote it', { skip }, (t) => forwardedForOnlyWhenTrusted(t, start))

t.test('discovery behind nginx advertises SERVICE_BASE_URL', { skip }, (t) => discoveryAdvertisesBaseUrl(t, start))

t.test('a body above SERVICE_MAX_BODY_BYTES reaches the server, which refuses it in its own shape', { skip }, (t) => serverJudgesBodySize(t, start))

t.test('the plain-HTTP server block redirects to https on the public name', { skip }, async (t) => {
  const server = await startServer(t)
  const nginx = await startNginx(t, NGINX!, listeningPort(server))
  const res = await request(`${nginx.redirectUrl}/mcp?x=1`, { headers: { host: PUBLIC_HOST } })
  await res.body.text()
  t.equal(res.statusCode, 301)
  t.equal(res.headers.location, `https://${PUBLIC_HOST}/mcp?x=1`)
})
