import { jsonSetting } from './json-setting.js'
import { providerUrlProblem } from './provider-url.js'
import { ROLES, type Role } from './roles.js'

/**
 * The upstream OpenID Connect providers people may sign in through (config file key `signInProviders`), checked whole
 * at start: a bad entry is a sentence naming the provider and the field, and never quotes a secret
 * (docs/decisions/single-sign-on.md). This module only reads the shape; discovery and keys are fetched at first use.
 */


export const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const
export type ClientAuthMethod = (typeof CLIENT_AUTH_METHODS)[number]

/** Algorithms a private_key_jwt client assertion may be signed with (asymmetric only). */
export const ASSERTION_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const

export interface OrganizationMapping {
  /** The organization's slug. */
  organization: string
  /** Group name at the provider → role in the organization. */
  groups: Record<string, Role>
}

export interface SignInProvider {
  /** Slug used in URLs (`/oauth/callback/<name>`) and stored with identities. */
  name: string
  /** Button text: "Sign in with <title>". */
  title: string
  issuer: string
  clientId: string
  clientAuth: ClientAuthMethod
  /** client_secret_basic / client_secret_post. */
  clientSecret?: string
  /** private_key_jwt: the private JWK (with `alg`). */
  privateKeyJwk?: Record<string, unknown> & { alg: string }
  scopes: string
  emailClaim: string
  groupsClaim: string
  provision: { justInTime: boolean; organizations: OrganizationMapping[] }
}

/** Thrown with a sentence for the operator; config.ts turns it into a ConfigError. */
export class ProviderConfigProblem extends Error {}

const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/
const KNOWN_KEYS = new Set([
  'name', 'title', 'issuer', 'clientId', 'clientSecret', 'clientSecretEnv', 'privateKeyJwk', 'privateKeyJwkEnv', 'clientAuth',
  'scopes', 'emailClaim', 'groupsClaim', 'provision',
])

/**
 * `raw` is the setting's value (an array of objects, or its JSON text from the environment); `env` is where
 * `clientSecretEnv` and `privateKeyJwkEnv` are read.
 */
export function parseSignInProviders(raw: unknown, env: Record<string, string | undefined>, where = 'signInProviders'): SignInProvider[] {
  const value = jsonSetting(raw, () => new ProviderConfigProblem(`${where} must be a JSON array of providers like [{"name": "corp", "issuer": "https://…", …}]`))
  if (value === undefined) return []
  if (!Array.isArray(value)) throw new ProviderConfigProblem(`${where} must be an array of providers`)
  const seen = new Set<string>()
  return value.map((entry, i) => {
    const provider = parseProvider(entry, env, `${where}[${i}]`)
    if (seen.has(provider.name)) throw new ProviderConfigProblem(`${where}: the name ${JSON.stringify(provider.name)} is used by two providers`)
    seen.add(provider.name)
    return provider
  })
}

function parseProvider(entry: unknown, env: Record<string, string | undefined>, at: string): SignInProvider {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw new ProviderConfigProblem(`${at} must be an object`)
  const e = entry as Record<string, unknown>
  const name = e.name
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new ProviderConfigProblem(`${at}: "name" must be 1-32 characters of a-z 0-9 - (it appears in the callback URL), got ${JSON.stringify(name)}`)
  }
  const where = `${at.split('[')[0]} provider ${name}`
  const problem = (field: string, text: string) => new ProviderConfigProblem(`${where}: "${field}" ${text}`)
  for (const key of Object.keys(e)) if (!KNOWN_KEYS.has(key)) throw problem(key, `is not a provider field (the fields are ${[...KNOWN_KEYS].join(', ')})`)

  const text = (field: string, fallback?: string): string => {
    const v = e[field] ?? fallback
    if (typeof v !== 'string' || v.trim() === '') throw problem(field, 'must be a non-empty string')
    return v.trim()
  }
  const title = text('title')
  const issuer = checkIssuer(text('issuer'), problem)
  const clientId = text('clientId')
  const clientAuth = text('clientAuth', 'client_secret_basic')
  if (!(CLIENT_AUTH_METHODS as readonly string[]).includes(clientAuth)) throw problem('clientAuth', `must be one of ${CLIENT_AUTH_METHODS.join(', ')}`)
  const scopes = text('scopes', 'openid email profile')
  if (!scopes.split(/\s+/).includes('openid')) throw problem('scopes', 'must include openid')
  const secrets = clientAuth === 'private_key_jwt' ? { privateKeyJwk: privateKey(e, env, problem) } : { clientSecret: clientSecret(e, env, problem) }
  return {
    name,
    title,
    issuer,
    clientId,
    clientAuth: clientAuth as ClientAuthMethod,
    ...secrets,
    scopes: scopes.split(/\s+/).join(' '),
    emailClaim: text('emailClaim', 'email'),
    groupsClaim: text('groupsClaim', 'groups'),
    provision: parseProvision(e.provision, problem),
  }
}

type Problem = (field: string, text: string) => ProviderConfigProblem

/** https, or http on a loopback host (a provider run by the tests); no query, fragment or credentials. */
function checkIssuer(issuer: string, problem: Problem): string {
  const wrong = providerUrlProblem(issuer)
  if (wrong) throw problem('issuer', wrong)
  // Kept as written (the ID token's iss is compared to it exactly) but for a trailing slash, which discovery adds.
  return issuer.replace(/\/+$/, '')
}

/** The secret itself (`clientSecret`) or the name of the environment variable that holds it (`clientSecretEnv`). */
function clientSecret(e: Record<string, unknown>, env: Record<string, string | undefined>, problem: Problem): string {
  if (e.privateKeyJwk !== undefined || e.privateKeyJwkEnv !== undefined) throw problem('privateKeyJwk', 'is only for clientAuth private_key_jwt')
  if (e.clientSecret !== undefined && e.clientSecretEnv !== undefined) throw problem('clientSecret', 'and "clientSecretEnv" cannot both be given')
  if (e.clientSecretEnv !== undefined) {
    if (typeof e.clientSecretEnv !== 'string' || e.clientSecretEnv === '') throw problem('clientSecretEnv', 'must name an environment variable')
    const secret = env[e.clientSecretEnv]
    if (secret === undefined || secret === '') throw problem('clientSecretEnv', `names ${e.clientSecretEnv}, which is not set`)
    return secret
  }
  if (typeof e.clientSecret !== 'string' || e.clientSecret === '') throw problem('clientSecret', 'must be given (or "clientSecretEnv", the environment variable holding it)')
  return e.clientSecret
}

function privateKey(e: Record<string, unknown>, env: Record<string, string | undefined>, problem: Problem): SignInProvider['privateKeyJwk'] & object {
  if (e.clientSecret !== undefined || e.clientSecretEnv !== undefined) throw problem('clientSecret', 'is not used with clientAuth private_key_jwt (give "privateKeyJwk")')
  if (e.privateKeyJwk !== undefined && e.privateKeyJwkEnv !== undefined) throw problem('privateKeyJwk', 'and "privateKeyJwkEnv" cannot both be given')
  let jwk: unknown = e.privateKeyJwk
  let field = 'privateKeyJwk'
  if (e.privateKeyJwkEnv !== undefined) {
    field = 'privateKeyJwkEnv'
    const text = typeof e.privateKeyJwkEnv === 'string' ? env[e.privateKeyJwkEnv] : undefined
    if (text === undefined || text === '') throw problem(field, `must name a set environment variable holding the private JWK as JSON`)
    try {
      jwk = JSON.parse(text)
    } catch {
      throw problem(field, `names ${String(e.privateKeyJwkEnv)}, which does not hold JSON`)
    }
  }
  if (jwk === null || typeof jwk !== 'object' || Array.isArray(jwk)) throw problem(field, 'must be a private JWK object (or "privateKeyJwkEnv")')
  const key = jwk as Record<string, unknown>
  if (typeof key.kty !== 'string' || typeof key.d !== 'string') throw problem(field, 'must be a private key (kty and d)')
  if (typeof key.alg !== 'string' || !(ASSERTION_ALGORITHMS as readonly string[]).includes(key.alg)) {
    throw problem(field, `must carry "alg", one of ${ASSERTION_ALGORITHMS.join(', ')}`)
  }
  return key as Record<string, unknown> & { alg: string }
}

function parseProvision(raw: unknown, problem: Problem): SignInProvider['provision'] {
  if (raw === undefined) return { justInTime: false, organizations: [] }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw problem('provision', 'must be an object { "justInTime": …, "organizations": […] }')
  const p = raw as Record<string, unknown>
  for (const key of Object.keys(p)) if (key !== 'justInTime' && key !== 'organizations') throw problem(`provision.${key}`, 'is not a field (justInTime, organizations)')
  if (p.justInTime !== undefined && typeof p.justInTime !== 'boolean') throw problem('provision.justInTime', 'must be true or false')
  const orgs = p.organizations ?? []
  if (!Array.isArray(orgs)) throw problem('provision.organizations', 'must be an array')
  const slugs = new Set<string>()
  const organizations = orgs.map((o, i): OrganizationMapping => {
    const at = `provision.organizations[${i}]`
    if (o === null || typeof o !== 'object' || Array.isArray(o)) throw problem(at, 'must be an object { "organization": slug, "groups": { group: role } }')
    const { organization, groups, ...rest } = o as Record<string, unknown>
    const extra = Object.keys(rest)[0]
    if (extra !== undefined) throw problem(`${at}.${extra}`, 'is not a field (organization, groups)')
    if (typeof organization !== 'string' || !SLUG.test(organization)) throw problem(`${at}.organization`, 'must be an organization slug')
    if (slugs.has(organization)) throw problem(`${at}.organization`, `names ${organization} a second time`)
    slugs.add(organization)
    if (groups === null || typeof groups !== 'object' || Array.isArray(groups)) throw problem(`${at}.groups`, 'must be an object of group name → role')
    for (const [group, role] of Object.entries(groups)) {
      if (!(ROLES as readonly unknown[]).includes(role)) throw problem(`${at}.groups.${group}`, `must be one of ${ROLES.join(', ')}`)
    }
    return { organization, groups: { ...(groups as Record<string, Role>) } }
  })
  return { justInTime: p.justInTime === true, organizations }
}
