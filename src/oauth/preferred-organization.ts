/** What the rule needs to know of one membership of the signed-in member. */
export interface MembershipChoice {
  id: string
  createdAt: number
  /** Whether the member's role there can grant some of the requested scope (else it cannot be chosen at all). */
  grantable: boolean
}

/**
 * The organization the consent page has chosen when it opens, for a member of several. The list itself stays in
 * alphabetical order; this only decides which entry is checked:
 *
 * 1. the organization the member last authorized this same client for (their newest grant to it, revoked or not),
 *    so re-connecting an application keeps its organization;
 * 2. otherwise their own organization, taken to be the one they have belonged to longest (oldest membership; ids,
 *    which are time-ordered, break ties): a user is created in, or creates, their own organization before being
 *    invited into others. The first-start owner's is `default`.
 *
 * Either choice counts only while it is still a membership whose role can grant some of the request; when neither
 * does, the result is undefined and the page falls back to the first organization that can.
 */
export function preferredMembership(memberships: readonly MembershipChoice[], lastChosenForClient: string | undefined): string | undefined {
  const usable = memberships.filter((m) => m.grantable)
  const last = usable.find((m) => m.id === lastChosenForClient)
  if (last) return last.id
  const [oldest] = [...usable].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return oldest?.id
}
