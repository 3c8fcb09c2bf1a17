import t from 'tap'
import { ConfigError, loadConfig } from '../../src/config.js'

// The signInProviders setting (src/lib/sign-in-providers.ts through config.ts): checked whole at start, each refusal
// a sentence naming the provider and the field, never the secret; and SERVICE_PASSWORD_SIGN_IN.

const SECRET = 'super-secret-value-1234'
const base = { name: 'corp', title: 'Corp', issuer: 'https://idp.example.com/realms/acme', clientId: 'mcp', clientSecret: SECRET }

function load(providers: unknown, env: Record<string, string> = {}, extra: Record<string, unknown> = {}) {
  return loadConfig({ env: { SERVICE_DATABASE: ':memory:', ...env }, overrides: { signInProviders: providers as never, ...extra } })
}

function refusal(providers: unknown, env: Record<string, string> = {}, extra: Record<string, unknown> = {}): string {
  try {
    load(providers, env, extra)
  } catch (err) {
    if (err instanceof ConfigError) return err.message
    throw err
  }
  return 'accepted'
}

t.test('a valid provider gets its defaults', async (t) => {
  const [p] = load([base]).signInProviders
  t.match(p, { name: 'corp', clientAuth: 'client_secret_basic', scopes: 'openid email profile', emailClaim: 'email', groupsClaim: 'groups', provision: { justInTime: false, organizations: [] } })
  t.equal(p!.issuer, 'https://idp.example.com/realms/acme')
})

t.test('each bad field is named with its provider, and the secret never appears', async (t) => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ issuer: 'http://idp.example.com' }, /provider corp: "issuer" must use https/],
    [{ issuer: 'not a url' }, /provider corp: "issuer"/],
    [{ clientId: '' }, /provider corp: "clientId"/],
    [{ clientAuth: 'magic' }, /provider corp: "clientAuth" must be one of/],
    [{ scopes: 'email profile' }, /provider corp: "scopes" must include openid/],
    [{ colour: 'blue' }, /provider corp: "colour" is not a provider field/],
    [{ clientSecret: undefined }, /provider corp: "clientSecret" must be given/],
    [{ clientAuth: 'private_key_jwt' }, /provider corp: "clientSecret" is not used with clientAuth private_key_jwt/],
    [{ provision: { justInTime: 'yes' } }, /provider corp: "provision.justInTime"/],
    [{ provision: { organizations: [{ organization: 'default', groups: { admins: 'god' } }] } }, /provider corp: "provision.organizations\[0\].groups.admins" must be one of viewer/],
    [{ provision: { organizations: [{ organization: 'Not A Slug', groups: {} }] } }, /"provision.organizations\[0\].organization"/],
  ]
  for (const [change, expected] of cases) {
    const message = refusal([{ ...base, ...change }])
    t.match(message, expected, JSON.stringify(change))
    t.notMatch(message, new RegExp(SECRET), 'the secret is not printed')
  }
  t.match(refusal([{ ...base, name: 'Bad Name' }]), /"name" must be 1-32 characters/)
  t.match(refusal([base, base]), /the name "corp" is used by two providers/)
  t.match(refusal({ corp: base }), /must be an array of providers/)
})

t.test('secrets can come from the environment', async (t) => {
  const { clientSecret: _s, ...noSecret } = base
  const [p] = load([{ ...noSecret, clientSecretEnv: 'CORP_SECRET' }], { CORP_SECRET: 'from-env' }).signInProviders
  t.equal(p!.clientSecret, 'from-env')
  t.match(refusal([{ ...noSecret, clientSecretEnv: 'CORP_SECRET' }]), /"clientSecretEnv" names CORP_SECRET, which is not set/)
  t.match(refusal([{ ...base, clientSecretEnv: 'CORP_SECRET' }], { CORP_SECRET: 'x' }), /cannot both be given/)
  const jwk = JSON.stringify({ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', d: 'd', alg: 'ES256' })
  const [k] = load([{ ...noSecret, clientAuth: 'private_key_jwt', privateKeyJwkEnv: 'CORP_JWK' }], { CORP_JWK: jwk }).signInProviders
  t.equal(k!.privateKeyJwk?.alg, 'ES256')
  t.match(refusal([{ ...noSecret, clientAuth: 'private_key_jwt', privateKeyJwk: { kty: 'oct', k: 'x', d: 'd', alg: 'HS256' } }]), /"privateKeyJwk" must carry "alg", one of RS256/)
})

t.test('http issuers only on loopback; the JSON form from the environment', async (t) => {
  t.equal(load([{ ...base, issuer: 'http://127.0.0.1:4000/' }]).signInProviders[0]!.issuer, 'http://127.0.0.1:4000')
  const fromEnv = loadConfig({ env: { SERVICE_DATABASE: ':memory:', SERVICE_SIGN_IN_PROVIDERS: JSON.stringify([base]) } })
  t.equal(fromEnv.signInProviders[0]!.name, 'corp')
  t.match(refusal('{not json'), /must be a JSON array/)
})

t.test('SERVICE_PASSWORD_SIGN_IN: on or off, and off needs a provider', async (t) => {
  t.equal(load([]).passwordSignIn, 'on')
  t.equal(load([base], {}, { passwordSignIn: 'off' }).passwordSignIn, 'off')
  t.match(refusal([], {}, { passwordSignIn: 'off' }), /SERVICE_PASSWORD_SIGN_IN is off but no sign-in provider is configured/)
  t.match(refusal([], { SERVICE_PASSWORD_SIGN_IN: 'maybe' }), /SERVICE_PASSWORD_SIGN_IN must be on or off/)
})
