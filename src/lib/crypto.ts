import { hash, randomBytes, randomUUID, scrypt, timingSafeEqual } from 'node:crypto'

/** SHA-256 as lowercase hex. Used for high-entropy secrets (API keys, codes, refresh tokens): no key derivation needed. */
export function sha256Hex(value: string): string {
  // The one-shot form (Node >= 20.12) skips the Hash object: a third of the cost for a bearer token hashed per request.
  return hash('sha256', value, 'hex')
}

/** Constant-time comparison of two strings (hashes or encodings), safe for differing lengths. */
export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a)
  const bb = Buffer.from(b)
  const len = Math.max(ab.length, bb.length, 32)
  const pa = Buffer.alloc(len)
  const pb = Buffer.alloc(len)
  ab.copy(pa)
  bb.copy(pb)
  return timingSafeEqual(pa, pb) && ab.length === bb.length
}

/** URL-safe random secret with `bytes` of entropy. */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url')
}

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz'

function base32(value: number, length: number): string {
  let out = ''
  for (let i = 0; i < length; i++) {
    out = CROCKFORD[value % 32] + out
    value = Math.floor(value / 32)
  }
  return out
}

let lastMs = -1
let sequence = 0

/**
 * Time-sortable identifier `<prefix>_<10 time chars><4 sequence chars><12 random chars>` (Crockford base32). Within one
 * millisecond the sequence increases, so keyset pagination by id follows creation order even for ids made together.
 */
export function newId(prefix: string): string {
  const now = Date.now()
  if (now === lastMs && sequence < 0xfffff) sequence++
  else {
    lastMs = now
    sequence = randomBytes(2).readUInt16BE() // random start within the lower half keeps ids unguessable but ordered
  }
  const rnd = randomBytes(8)
  const random = base32(rnd.readUInt32BE(0) % 0x40000000, 6) + base32(rnd.readUInt32BE(4) % 0x40000000, 6)
  return `${prefix}_${base32(now, 10)}${base32(sequence, 4)}${random}`
}

export function newSessionId(): string {
  return randomUUID()
}

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 }

function scryptAsync(password: string, salt: Buffer, keylen: number, opts: { N: number; r: number; p: number }): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keylen, { ...opts, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key)))
  })
}

/**
 * Whether `stored` is a password hash as hashPassword writes it, at least as costly as ours (N, r, p) with a salt and a
 * key of full length: what SERVICE_BOOTSTRAP_PASSWORD_HASH must be.
 */
export function isPasswordHash(stored: string): boolean {
  const m = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]{22,})\$([A-Za-z0-9_-]{43,})$/.exec(stored)
  if (!m) return false
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])]
  return n >= SCRYPT.N && (n & (n - 1)) === 0 && r >= SCRYPT.r && p >= SCRYPT.p
}

/** Password hash `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await scryptAsync(password.normalize('NFKC'), salt, SCRYPT.keylen, SCRYPT)
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64url')}$${key.toString('base64url')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [, n, r, p, saltB64, keyB64] = parts as [string, string, string, string, string, string]
  const expected = Buffer.from(keyB64, 'base64url')
  // An empty or truncated hash would compare equal to an equally short derived key: never accept it.
  if (expected.length < 16) return false
  let key: Buffer
  try {
    key = await scryptAsync(password.normalize('NFKC'), Buffer.from(saltB64, 'base64url'), expected.length, {
      N: Number(n),
      r: Number(r),
      p: Number(p),
    })
  } catch {
    return false // malformed or unaffordable parameters in the stored value
  }
  return key.length === expected.length && timingSafeEqual(key, expected)
}
