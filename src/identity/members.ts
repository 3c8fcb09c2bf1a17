import type { JWTPayload } from 'jose'
import type { Repos } from '../db/repos/index.js'
import type { User } from '../db/types.js'
import { isServiceError } from '../errors/service-error.js'
import { ROLES, type Role } from '../lib/roles.js'
import type { OrganizationMapping, SignInProvider } from '../lib/sign-in-providers.js'

/** Why a person who proved who they are at the provider still may not sign in here: the catalog's codes. */
export type MemberRefusal = 'SIGN_IN_NO_EMAIL' | 'SIGN_IN_EMAIL_UNVERIFIED' | 'SIGN_IN_NOT_INVITED' | 'SIGN_IN_ACCOUNT_DISABLED' | 'SIGN_IN_EMAIL_TAKEN'

/** One membership the provider's group mapping changed at this sign-in. */
export interface MembershipChange {
  organization: string
  from: Role | null
  to: Role | null
  /** The change was refused and the membership kept (the organization's last owner). */
  kept?: string
}

export type MemberResult =
  | { user: User; found: 'identity' | 'email' | 'created'; email: string; changes: MembershipChange[] }
  | { refused: MemberRefusal }

interface Log {
  warn(obj: object, msg: string): void
}

/**
 * The user an upstream sign-in is for, and their memberships brought in line with the provider's groups
 * (docs/decisions/single-sign-on.md): found by (provider, subject); else by the verified email, and the identity
 * linked; else created without a password when the provider allows just-in-time accounts; else refused. An email is
 * trusted only when `email_verified` is true. For each organization the mapping names, the member gets the highest
 * role among their mapped groups, and loses the membership when none of their groups maps; organizations the mapping
 * does not name are left alone; an organization's last owner is kept (and a warning logged) rather than removed.
 */
export async function signInMember(repos: Repos, provider: SignInProvider, claims: JWTPayload & { sub: string }, now: number, log: Log): Promise<MemberResult> {
  const email = claims[provider.emailClaim]
  if (typeof email !== 'string' || !/^[^@\s]+@[^@\s]+$/.test(email)) return { refused: 'SIGN_IN_NO_EMAIL' }
  if (claims.email_verified !== true) return { refused: 'SIGN_IN_EMAIL_UNVERIFIED' }

  const found = await findUser(repos, provider, claims.sub, email, now)
  if ('refused' in found) return found
  if (found.user.disabledAt !== null) return { refused: 'SIGN_IN_ACCOUNT_DISABLED' }
  const changes = await applyGroups(repos, provider, found.user, groupsOf(claims[provider.groupsClaim]), log)
  return { ...found, email, changes }
}

async function findUser(repos: Repos, provider: SignInProvider, subject: string, email: string, now: number): Promise<{ user: User; found: 'identity' | 'email' | 'created' } | { refused: MemberRefusal }> {
  const identity = await repos.userIdentities.find(provider.name, subject)
  if (identity) {
    const user = await repos.users.byId(identity.userId)
    // The identity row cascades with its user: a missing user means a race with a deletion.
    if (!user) return { refused: 'SIGN_IN_NOT_INVITED' }
    await repos.userIdentities.signedIn(provider.name, subject, email, now)
    return { user, found: 'identity' }
  }
  let user = await repos.users.byEmail(email)
  let found: 'email' | 'created' = 'email'
  if (!user) {
    if (!provider.provision.justInTime) return { refused: 'SIGN_IN_NOT_INVITED' }
    user = await createUser(repos, email, nameOf(email))
    found = 'created'
  }
  // One identity per (provider, user): another subject of the same provider already holding this user is someone
  // else the provider now gives the same email (a reassigned address); linking them would hand over the account.
  if ((await repos.userIdentities.forUser(user.id)).some((i) => i.provider === provider.name)) return { refused: 'SIGN_IN_EMAIL_TAKEN' }
  await repos.userIdentities.create({ provider: provider.name, subject, userId: user.id, email, createdAt: now, lastSignInAt: now })
  return { user, found }
}

/** A new user without a password; when another sign-in created them a moment ago, that one. */
async function createUser(repos: Repos, email: string, name: string): Promise<User> {
  try {
    return await repos.users.create({ email, name, passwordHash: null })
  } catch (err) {
    const again = isServiceError(err) && err.code === 'CONFLICT' ? await repos.users.byEmail(email) : undefined
    if (again) return again
    throw err
  }
}

function nameOf(email: string): string {
  return email.split('@')[0] ?? email
}

/** The groups claim: an array of strings (anything else counts as no groups). */
export function groupsOf(claim: unknown): string[] {
  return Array.isArray(claim) ? claim.filter((g): g is string => typeof g === 'string') : []
}

/** The highest role the groups give in one mapped organization, or null when none of them maps. */
export function mappedRole(mapping: OrganizationMapping, groups: readonly string[]): Role | null {
  let best: Role | null = null
  for (const group of groups) {
    const role = mapping.groups[group]
    if (role !== undefined && (best === null || ROLES.indexOf(role) > ROLES.indexOf(best))) best = role
  }
  return best
}

async function applyGroups(repos: Repos, provider: SignInProvider, user: User, groups: string[], log: Log): Promise<MembershipChange[]> {
  const changes: MembershipChange[] = []
  for (const mapping of provider.provision.organizations) {
    const organization = await repos.organizations.bySlug(mapping.organization)
    if (!organization) {
      log.warn({ provider: provider.name, organization: mapping.organization }, 'sign-in provider maps groups to an organization that does not exist: skipped')
      continue
    }
    const current = (await repos.memberships.find(user.id, organization.id))?.role ?? null
    const next = mappedRole(mapping, groups)
    if (current === next) continue
    const change: MembershipChange = { organization: mapping.organization, from: current, to: next }
    try {
      if (next === null) await repos.memberships.remove(user.id, organization.id)
      else await repos.memberships.upsert({ userId: user.id, organizationId: organization.id, role: next })
    } catch (err) {
      // The organization's last owner: kept, so that someone can still manage it.
      if (!isServiceError(err) || err.code !== 'CONFLICT') throw err
      change.kept = err.message
      log.warn({ provider: provider.name, organization: mapping.organization, user: user.id, from: current, to: next }, 'sign-in provider groups would leave the organization without an owner: membership kept')
    }
    changes.push(change)
  }
  return changes
}
