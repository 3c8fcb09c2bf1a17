import { createHash } from 'node:crypto'
import { constantTimeEqual } from '../lib/crypto.js'

/** RFC 7636 §4.1 code_verifier ABNF: 43 to 128 unreserved characters. */
export const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/

// base64url without padding of a 32-byte digest is always 43 characters.
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/

/** Null when `challenge` has the shape of an S256 challenge, else a reason naming the usual client mistake. */
export function checkChallenge(challenge: string): string | null {
  if (typeof challenge !== 'string') return 'code_challenge must be a string'
  if (CHALLENGE.test(challenge)) return null
  // Padding and the standard alphabet first: they are the common mistakes, and padding also makes the length 44.
  if (challenge.includes('=')) return "code_challenge must be base64url without '=' padding"
  if (challenge.includes('+') || challenge.includes('/')) return 'code_challenge must use the base64url alphabet (- and _, not + and /)'
  if (challenge.length !== 43) return 'code_challenge must be 43 characters: base64url of a SHA-256 digest'
  return 'code_challenge may only contain A-Z a-z 0-9 - _'
}

/** Null when `verifier` matches the RFC 7636 ABNF, else a reason. */
export function checkVerifier(verifier: string): string | null {
  if (typeof verifier !== 'string') return 'code_verifier must be a string'
  if (VERIFIER.test(verifier)) return null
  if (verifier.length < 43 || verifier.length > 128) return 'code_verifier must be 43 to 128 characters'
  return 'code_verifier may only contain A-Z a-z 0-9 - . _ ~'
}

/** The S256 challenge of a verifier: base64url (no padding) of its SHA-256. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url')
}

/**
 * True when `verifier` is well formed and its S256 challenge equals `challenge`. A malformed verifier never matches,
 * even if its hash would (RFC 7636 §4.1 constrains what the server accepts, not only what clients send).
 */
export function verifyPkce(verifier: string, challenge: string): boolean {
  if (typeof verifier !== 'string' || typeof challenge !== 'string') return false
  if (checkVerifier(verifier) !== null || checkChallenge(challenge) !== null) return false
  // constantTimeEqual pads to equal length, so it neither throws nor short-circuits on a length difference.
  return constantTimeEqual(s256(verifier), challenge)
}
