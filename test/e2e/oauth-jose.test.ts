/**
 * Access tokens are ordinary JWTs: a generic JOSE library (jose) verifies them with nothing but the published JWKS, the
 * issuer and the audience. Key rotation keeps old tokens valid; forged tokens (tampered, `alg: none`, another key
 * under our kid, HMAC with the public key, wrong typ/iss/aud) are refused on /mcp with 401 INVALID_TOKEN.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto'
import { createRemoteJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWTPayload } from 'jose'
import t, { type Test } from 'tap'
import { request } from 'undici'
import { generateSigningKey } from '../../src/oauth/keyring.js'
import { initializeMessage, post } from '../helpers/mcp.js'
import { oauthTokens, tokenRequest } from '../helpers/oauth.js'
import { defaultOrganization, ownerMembership } from '../helpers/seed.js'
import { OWNER_EMAIL, startServer, type TestServer } from '../helpers/server.js'

function jwksUrl(server: TestServer): URL {
  return new URL(`${server.url}/.well-known/jwks.json`)
}

/** The checks a resource server would configure for our access tokens. */
function verifyOptions(server: TestServer) {
  return { issuer: server.url, audience: server.url, typ: 'at+jwt', algorithms: ['ES256'] }
}

async function fetchJwks(server: TestServer): Promise<{ status: number; headers: Record<string, unknown>; keys: Array<Record<string, string>> }> {
  const res = await request(jwksUrl(server))
  const body = (await res.body.json()) as { keys: Array<Record<string, string>> }
  return { status: res.statusCode, headers: res.headers, keys: body.keys }
}

/** initialize on /mcp with this bearer token: 200 when it is accepted. */
async function initializeWith(server: TestServer, token: string) {
  return post(server.mcpUrl, initializeMessage(), { authorization: `Bearer ${token}` })
}

async function refused(t: Test, server: TestServer, token: string, what: string) {
  const reply = await initializeWith(server, token)
  t.equal(reply.status, 401, `${what}: 401 on /mcp`)
  t.equal(reply.json?.error?.code, 'INVALID_TOKEN', `${what}: INVALID_TOKEN`)
  t.match(String(reply.headers['www-authenticate']), /^Bearer error="invalid_token"/, `${what}: invalid_token challenge`)
}

function b64url(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
}

function parts(token: string): [string, string, string] {
  const [h, p, s] = token.split('.')
  if (h === undefined || p === undefined || s === undefined) throw new Error('not a compact JWS')
  return [h, p, s]
}

function payloadOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(parts(token)[1], 'base64url').toString('utf8')) as Record<string, unknown>
}

/** Replaces one character in the middle of a base64url string (never the last one, whose low bits may be padding). */
function flipMiddle(s: string): string {
  const i = Math.floor(s.length / 2)
  return s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1)
}

t.test('access tokens verify with jose and the published JWKS', async (t) => {
  const server = await startServer(t)
  const { client, tokens } = await oauthTokens(server)

  const jwks = await fetchJwks(server)
  t.equal(jwks.status, 200)
  t.equal(jwks.keys.length, 1, 'one signing key on a fresh server')
  const current = (await server.app.repos.signingKeys.current())!
  const published = jwks.keys[0]!
  t.same(published, { kty: 'EC', crv: 'P-256', x: current.publicJwk.x, y: current.publicJwk.y, kid: current.kid, alg: 'ES256', use: 'sig' }, 'the public half only')
  t.notOk('d' in published, 'no private component in the JWKS')

  const { payload, protectedHeader } = await jwtVerify(tokens.access_token, createRemoteJWKSet(jwksUrl(server)), verifyOptions(server))
  t.same(protectedHeader, { alg: 'ES256', typ: 'at+jwt', kid: current.kid }, 'header: alg, typ and the kid of the current key')

  const owner = (await server.app.repos.users.byEmail(OWNER_EMAIL))!
  const claims = payload as JWTPayload & Record<string, unknown>
  t.same(Object.keys(claims).sort(), ['aud', 'client_id', 'exp', 'iat', 'iss', 'jti', 'mid', 'org', 'scope', 'sub'], 'exactly the claims of docs/decisions/oauth.md')
  t.equal(claims.iss, server.url)
  t.equal(claims.aud, server.url, 'audience: the base address (a string, not an array)')
  t.equal(claims.sub, owner.id, 'sub: the user')
  t.equal(claims.org, (await defaultOrganization(server)).id, 'org: the organization')
  t.equal(claims.mid, (await ownerMembership(server)).id, 'mid: the membership')
  t.equal(claims.scope, 'mcp:read mcp:write')
  t.equal(claims.client_id, client.client_id)
  t.type(claims.jti, 'string')
  t.ok((claims.jti as string).length >= 16, 'jti is random')
  t.ok(await server.app.repos.oauthGrants.accessTokenState(claims.jti as string), 'jti is recorded on the server')
  t.type(claims.iat, 'number')
  t.ok(Math.abs(claims.iat! - Date.now() / 1000) < 60, 'iat is now')
  t.equal(claims.exp! - claims.iat!, 3600, 'valid 3600 s')
  t.equal(tokens.expires_in, 3600)

  // The same checks refuse what they should: another audience or issuer.
  const jwkSet = createRemoteJWKSet(jwksUrl(server))
  await t.rejects(jwtVerify(tokens.access_token, jwkSet, { ...verifyOptions(server), audience: 'https://other.example' }), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' })
  await t.rejects(jwtVerify(tokens.access_token, jwkSet, { ...verifyOptions(server), issuer: 'https://other.example' }), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' })

  const ok = await initializeWith(server, tokens.access_token)
  t.equal(ok.status, 200, 'the token is accepted on /mcp')
})

t.test('signing-key rotation: both keys published, old tokens keep working, new tokens carry the new kid', async (t) => {
  const server = await startServer(t)
  const first = await oauthTokens(server)
  const oldKid = (await server.app.repos.signingKeys.current())!.kid
  t.equal(decodeProtectedHeader(first.tokens.access_token).kid, oldKid)

  const next = generateSigningKey()
  await server.app.repos.signingKeys.rotate(next)
  t.equal((await server.app.repos.signingKeys.current())?.kid, next.kid, 'the new key signs from now on')

  const jwks = await fetchJwks(server)
  t.same(jwks.keys.map((k) => k.kid).sort(), [oldKid, next.kid].sort(), 'the JWKS publishes the retired key and the new one')
  for (const key of jwks.keys) t.notOk('d' in key, `no private part for ${key.kid}`)

  // A verifier that fetches the JWKS after the rotation.
  const jwkSet = createRemoteJWKSet(jwksUrl(server))
  const old = await jwtVerify(first.tokens.access_token, jwkSet, verifyOptions(server))
  t.equal(old.protectedHeader.kid, oldKid, 'a token signed before the rotation still verifies with jose')
  const oldOnMcp = await initializeWith(server, first.tokens.access_token)
  t.equal(oldOnMcp.status, 200, 'and on /mcp (its first use there, so no cached verification)')

  // Refreshing the same grant now signs with the new key.
  const refreshed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: first.tokens.refresh_token, client_id: first.client.client_id })
  t.equal(refreshed.status, 200)
  const newToken = refreshed.json.access_token as string
  t.equal(decodeProtectedHeader(newToken).kid, next.kid, 'a refreshed token carries the new kid')
  const second = await oauthTokens(server)
  t.equal(decodeProtectedHeader(second.tokens.access_token).kid, next.kid, 'so does a token from a new authorization')

  for (const token of [newToken, second.tokens.access_token]) {
    const verified = await jwtVerify(token, jwkSet, verifyOptions(server))
    t.equal(verified.protectedHeader.kid, next.kid)
    t.equal((await initializeWith(server, token)).status, 200, 'accepted on /mcp')
  }

  // A verifier whose cache predates the rotation learns the new kid by refetching (jose refetches on an unknown kid).
  const stale = createRemoteJWKSet(jwksUrl(server), { cooldownDuration: 0 })
  t.ok(await jwtVerify(newToken, stale, verifyOptions(server)), 'the key set is fetched and cached')
  t.equal(stale.jwks()?.keys.length, 2)
  await server.app.repos.signingKeys.rotate(generateSigningKey())
  const third = await oauthTokens(server)
  t.equal((await jwtVerify(first.tokens.access_token, stale, verifyOptions(server))).protectedHeader.kid, oldKid, 'two rotations later the first key still verifies')
  t.ok(await jwtVerify(third.tokens.access_token, stale, verifyOptions(server)), 'a cached key set picks up the newest key')
  t.equal(stale.jwks()?.keys.length, 3, 'by refetching the JWKS')
  t.equal((await fetchJwks(server)).keys.length, 3, 'every key that may have signed an unexpired token is published')
})

t.test('forged tokens are refused on /mcp with 401 INVALID_TOKEN', async (t) => {
  const server = await startServer(t)
  const { tokens } = await oauthTokens(server)
  const real = tokens.access_token
  const [header, payload, signature] = parts(real)
  const claims = payloadOf(real)
  const current = (await server.app.repos.signingKeys.current())!
  const kid = current.kid
  const jwkSet = createRemoteJWKSet(jwksUrl(server))

  await t.test('tampered signature', async (t) => {
    const forged = `${header}.${payload}.${flipMiddle(signature)}`
    await t.rejects(jwtVerify(forged, jwkSet, verifyOptions(server)), { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' }, 'jose refuses it too')
    await refused(t, server, forged, 'tampered signature')
  })

  await t.test('tampered payload under the original signature', async (t) => {
    const forged = `${header}.${b64url({ ...claims, scope: 'mcp:read mcp:write', sub: 'usr_someone_else' })}.${signature}`
    await t.rejects(jwtVerify(forged, jwkSet, verifyOptions(server)), { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' })
    await refused(t, server, forged, 'tampered payload')
  })

  await t.test('alg none', async (t) => {
    const noneHeader = b64url({ alg: 'none', typ: 'at+jwt', kid })
    const unsigned = `${noneHeader}.${payload}.`
    await t.rejects(jwtVerify(unsigned, jwkSet, verifyOptions(server)))
    await refused(t, server, unsigned, 'alg none, empty signature')
    // The same with something in the signature slot, so the token has the compact-JWS shape the verifier looks for.
    await refused(t, server, `${noneHeader}.${payload}.${signature}`, 'alg none, a signature attached')
    await refused(t, server, `${b64url({ alg: 'none' })}.${payload}.AA`, 'alg none without kid')
  })

  await t.test('another ES256 key under our kid', async (t) => {
    const { privateKey, publicKey } = await generateKeyPair('ES256')
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid }).sign(privateKey)
    // Sanity: the forgery is a valid JWT for its own key.
    t.ok(await jwtVerify(forged, publicKey, verifyOptions(server)), 'valid under the attacker key')
    await t.rejects(jwtVerify(forged, jwkSet, verifyOptions(server)), { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' })
    await refused(t, server, forged, 'foreign key, same kid')
    // And with a kid the server does not know.
    const unknownKid = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'not-a-known-kid' }).sign(privateKey)
    await refused(t, server, unknownKid, 'foreign key, unknown kid')
    // A JWK header (embedded key) is not trusted either.
    const embedded = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid, jwk: await exportJWK(publicKey) }).sign(privateKey)
    await refused(t, server, embedded, 'foreign key embedded as jwk')
  })

  await t.test('HS256 keyed with the public key (algorithm confusion)', async (t) => {
    const publicPem = createPublicKey({ key: { ...current.publicJwk }, format: 'jwk' }).export({ format: 'pem', type: 'spki' }).toString()
    for (const secret of [publicPem, JSON.stringify(current.publicJwk)]) {
      const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid }).sign(new TextEncoder().encode(secret))
      await refused(t, server, forged, 'HS256 with the public key as secret')
    }
  })

  await t.test("signed with the server's own key but not an access token for us", async (t) => {
    // The private key is read from the database only to build these near-misses: each differs from a real token in one check.
    const serverKey = createPrivateKey(current.privateKey)
    const sign = (body: Record<string, unknown>, typ = 'at+jwt') => new SignJWT(body).setProtectedHeader({ alg: 'ES256', typ, kid }).sign(serverKey)
    const control = await sign(claims)
    t.equal((await initializeWith(server, control)).status, 200, 'control: re-signing the real claims is accepted')
    await refused(t, server, await sign(claims, 'JWT'), 'typ JWT')
    await refused(t, server, await sign({ ...claims, aud: 'https://other.example' }), 'another audience')
    await refused(t, server, await sign({ ...claims, aud: `${server.url}/mcp` }), 'audience with a path')
    await refused(t, server, await sign({ ...claims, iss: 'https://other.example' }), 'another issuer')
    await refused(t, server, await sign({ ...claims, jti: 'never-issued-jti' }), 'a jti the server never issued')
    const { mid: _m, ...noMid } = claims
    await refused(t, server, await sign(noMid), 'a required claim missing')
  })

  const stillOk = await initializeWith(server, real)
  t.equal(stillOk.status, 200, 'the genuine token is unaffected')
})
