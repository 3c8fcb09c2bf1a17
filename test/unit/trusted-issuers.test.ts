import t from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'
import { DEFAULT_ASSERTION_ALGORITHMS } from '../../src/lib/trusted-issuers.js'

const ISSUER = 'https://idp.example.com'
const JWKS = 'https://idp.example.com/keys'

function load(trustedIssuers: unknown) {
  return loadConfig({ env: { SERVICE_TRUSTED_ISSUERS: typeof trustedIssuers === 'string' ? trustedIssuers : JSON.stringify(trustedIssuers) } })
}

/** The sentence a bad value stops the start with. */
function refusal(trustedIssuers: unknown): string {
  try {
    load(trustedIssuers)
  } catch (err) {
    if (err instanceof ConfigError) return err.message
    throw err
  }
  throw new Error('expected a ConfigError')
}

t.test('none by default: the grant is off', async (t) => {
  t.same(loadConfig({ env: {} }).trustedIssuers, [])
})

t.test('an issuer gets the default asymmetric algorithms; every field is kept', async (t) => {
  t.same(load([{ issuer: ISSUER, jwksUri: JWKS }]).trustedIssuers, [{ issuer: ISSUER, jwksUri: JWKS, algorithms: DEFAULT_ASSERTION_ALGORITHMS }])
  const full = { issuer: ISSUER, jwksUri: JWKS, algorithms: ['RS256'], clients: ['mcp_a', 'https://client.example/meta.json'], organization: 'acme' }
  t.same(load([full]).trustedIssuers, [full])
  t.same(load([{ issuer: 'http://127.0.0.1:8080', jwksUri: 'http://localhost:8080/jwks' }]).trustedIssuers[0]?.issuer, 'http://127.0.0.1:8080', 'http on a loopback host (tests)')
})

t.test('each bad value stops the start with a sentence naming the setting, the issuer and the field', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    ['{not json', /SERVICE_TRUSTED_ISSUERS.*JSON array/],
    [{ issuer: ISSUER }, /must be an array/],
    [[42], /entry 0 must be an object/],
    [[{ jwksUri: JWKS }], /entry 0 needs "issuer"/],
    [[{ issuer: 'http://idp.example.com', jwksUri: JWKS }], /issuer http:\/\/idp\.example\.com: "issuer" must use https/],
    [[{ issuer: ISSUER }], /issuer https:\/\/idp\.example\.com: "jwksUri" is required/],
    [[{ issuer: ISSUER, jwksUri: 'http://keys.example.com/jwks' }], /"jwksUri" must use https/],
    [[{ issuer: ISSUER, jwksUri: 'https://user:pw@idp.example.com/keys' }], /"jwksUri" must not contain credentials/],
    [[{ issuer: `${ISSUER}?tenant=1`, jwksUri: JWKS }], /"issuer" must not contain credentials, a query/],
    [[{ issuer: ISSUER, jwksUri: JWKS, algorithms: ['HS256'] }], /algorithm "HS256" is not accepted.*never none or HS\*/],
    [[{ issuer: ISSUER, jwksUri: JWKS, algorithms: ['none'] }], /algorithm "none" is not accepted/],
    [[{ issuer: ISSUER, jwksUri: JWKS, algorithms: [] }], /"algorithms" must be a non-empty array/],
    [[{ issuer: ISSUER, jwksUri: JWKS, clients: [] }], /"clients" must be a non-empty array/],
    [[{ issuer: ISSUER, jwksUri: JWKS, organization: 'Not A Slug' }], /"organization" must be an organization slug/],
    [[{ issuer: ISSUER, jwksUri: JWKS, jwks_uri: JWKS }], /issuer https:\/\/idp\.example\.com: unknown field "jwks_uri"/],
    [[{ issuer: ISSUER, jwksUri: JWKS }, { issuer: ISSUER, jwksUri: JWKS }], /listed twice/],
  ]
  for (const [value, message] of cases) t.match(refusal(value), message, JSON.stringify(value))
})
