import { createHash } from 'node:crypto'
import t from 'tap'
import { checkChallenge, checkVerifier, s256, VERIFIER, verifyPkce } from '../../src/oauth/pkce.js'

// RFC 7636 Appendix B (the verifier is the base64url of the octets listed there).
const RFC_VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'
const RFC_CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'

t.test('s256', async (t) => {
  t.equal(s256(RFC_VERIFIER), RFC_CHALLENGE, 'RFC 7636 Appendix B vector')
  const octets = [116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121]
  t.equal(Buffer.from(octets).toString('base64url'), RFC_VERIFIER, 'the verifier is the RFC octets in base64url')
  // A commonly mistyped copy of the vector: one character off must not match.
  t.not(s256('dBjftJeZ4CVP-mB92K27uhbUJU2p1r-wW1gFWFOEjXk'), RFC_CHALLENGE)
  const v = 'a'.repeat(128)
  t.equal(s256(v), createHash('sha256').update(v).digest('base64url'))
  t.match(s256('x'.repeat(43)), /^[A-Za-z0-9_-]{43}$/, '43 base64url characters, no padding')
})

t.test('VERIFIER and checkVerifier', async (t) => {
  const ok = ['a'.repeat(43), 'a'.repeat(128), RFC_VERIFIER, 'A-Z.a_z~0123456789' + 'x'.repeat(25)]
  for (const v of ok) {
    t.ok(VERIFIER.test(v), `matches: ${v.slice(0, 20)}… (${v.length})`)
    t.equal(checkVerifier(v), null)
  }
  const length = 'code_verifier must be 43 to 128 characters'
  const alphabet = 'code_verifier may only contain A-Z a-z 0-9 - . _ ~'
  t.equal(checkVerifier('a'.repeat(42)), length, '42 characters')
  t.equal(checkVerifier('a'.repeat(129)), length, '129 characters')
  t.equal(checkVerifier(''), length, 'empty')
  t.equal(checkVerifier('a'.repeat(42) + ' '), alphabet, 'a space')
  t.equal(checkVerifier('a'.repeat(21) + ' ' + 'a'.repeat(21)), alphabet, 'a space inside')
  t.equal(checkVerifier('a'.repeat(42) + '='), alphabet, 'padding')
  t.equal(checkVerifier('a'.repeat(42) + '+'), alphabet)
  t.equal(checkVerifier('a'.repeat(42) + '/'), alphabet)
  t.equal(checkVerifier('a'.repeat(42) + 'é'), alphabet, 'non-ASCII')
  t.equal(checkVerifier('a'.repeat(42) + '\n'), alphabet, 'a trailing newline ($ must not let it through)')
  t.ok(!VERIFIER.test('a'.repeat(43) + '\n'))
  t.equal(checkVerifier(undefined as unknown as string), 'code_verifier must be a string')
})

t.test('checkChallenge', async (t) => {
  t.equal(checkChallenge(RFC_CHALLENGE), null, 'RFC vector')
  t.equal(checkChallenge(s256('b'.repeat(60))), null)

  const padding = "code_challenge must be base64url without '=' padding"
  const alphabet = 'code_challenge must use the base64url alphabet (- and _, not + and /)'
  const length = 'code_challenge must be 43 characters: base64url of a SHA-256 digest'
  const standard = createHash('sha256').update(RFC_VERIFIER).digest('base64')
  t.equal(standard, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM=', 'standard base64 of the vector')
  t.equal(checkChallenge(standard), padding, 'standard base64 with padding: padding is reported first')
  t.equal(checkChallenge(RFC_CHALLENGE + '='), padding, 'padded base64url')
  t.equal(checkChallenge(standard.slice(0, -1)), alphabet, 'standard alphabet without padding')
  t.equal(checkChallenge('/' + RFC_CHALLENGE.slice(1)), alphabet, 'a slash')
  t.equal(checkChallenge(RFC_CHALLENGE.slice(0, 42)), length, '42 characters')
  t.equal(checkChallenge(RFC_CHALLENGE + 'A'), length, '44 characters')
  t.equal(checkChallenge(''), length, 'empty')
  t.equal(checkChallenge(RFC_VERIFIER + 'x'.repeat(40)), length, 'a verifier sent as the challenge (plain)')
  t.equal(checkChallenge('.' + RFC_CHALLENGE.slice(1)), 'code_challenge may only contain A-Z a-z 0-9 - _', 'other characters')
  t.equal(checkChallenge(RFC_CHALLENGE.slice(0, 42) + ' '), 'code_challenge may only contain A-Z a-z 0-9 - _')
  t.equal(checkChallenge(RFC_CHALLENGE + '\n'), length, 'a trailing newline is not ignored')
  t.equal(checkChallenge(undefined as unknown as string), 'code_challenge must be a string')
})

t.test('verifyPkce', async (t) => {
  t.equal(verifyPkce(RFC_VERIFIER, RFC_CHALLENGE), true, 'RFC vector')
  const v = 'Z'.repeat(100)
  t.equal(verifyPkce(v, s256(v)), true)
  t.equal(verifyPkce(v + 'Z', s256(v)), false, 'another verifier')
  t.equal(verifyPkce(RFC_VERIFIER, 'F' + RFC_CHALLENGE.slice(1)), false, 'another challenge')
  t.equal(verifyPkce(RFC_VERIFIER, RFC_CHALLENGE.slice(0, 42)), false, 'shorter challenge')
  t.equal(verifyPkce(RFC_VERIFIER, RFC_CHALLENGE + '='), false, 'padded challenge')
  t.equal(verifyPkce(RFC_VERIFIER, ''), false, 'empty challenge')
  t.equal(verifyPkce(RFC_VERIFIER, RFC_VERIFIER), false, 'plain method is not accepted')
  t.equal(verifyPkce('', s256('')), false, 'empty verifier, even with its own hash')
  const short = 'a'.repeat(42)
  t.equal(verifyPkce(short, s256(short)), false, 'too short a verifier never matches')
  const spaced = 'a'.repeat(42) + ' '
  t.equal(verifyPkce(spaced, s256(spaced)), false, 'ill-formed verifier never matches')
  t.equal(verifyPkce(undefined as unknown as string, RFC_CHALLENGE), false, 'no exception for non-strings')
  t.equal(verifyPkce(RFC_VERIFIER, null as unknown as string), false)
  t.equal(verifyPkce(RFC_VERIFIER, 'é'.repeat(43)), false, 'multi-byte challenge')
})
