import type { RootStore, Store } from '../store.js'
import { apiKeysRepo } from './api-keys.js'
import { appsRepo } from './apps.js'
import { assertionsRepo } from './assertions.js'
import { auditRepo } from './audit.js'
import { authorizationsRepo } from './authorizations.js'
import { browserInputsRepo } from './browser-inputs.js'
import { browserSessionsRepo } from './browser-sessions.js'
import type { CredentialChanges } from './credential-changes.js'
import { deploymentsRepo } from './deployments.js'
import { envVarsRepo } from './env-vars.js'
import { healthRepo } from './health.js'
import { idempotencyRepo } from './idempotency.js'
import { membershipsRepo } from './memberships.js'
import { oauthClientsRepo } from './oauth-clients.js'
import { oauthGrantsRepo } from './oauth-grants.js'
import { organizationQuotasRepo } from './organization-quotas.js'
import { organizationsRepo } from './organizations.js'
import { processesRepo } from './processes.js'
import { requestStateKeysRepo } from './request-state-keys.js'
import { serviceMetaRepo } from './service-meta.js'
import { sessionsRepo } from './sessions.js'
import { signInFlowsRepo } from './sign-in-flows.js'
import { signingKeysRepo } from './signing-keys.js'
import { tasksRepo } from './tasks.js'
import { userIdentitiesRepo } from './user-identities.js'
import { usersRepo } from './users.js'

/** Every query the server runs lives in one of these modules; each method returns a promise. */
function buildRepos(store: Store, changes: CredentialChanges) {
  return {
    organizations: organizationsRepo(store),
    /** Organizations' own quota values, and what the quotas count (src/limits/quotas.ts). */
    organizationQuotas: organizationQuotasRepo(store),
    users: usersRepo(store, changes),
    memberships: membershipsRepo(store, changes),
    apiKeys: apiKeysRepo(store, changes),
    sessions: sessionsRepo(store),
    apps: appsRepo(store),
    envVars: envVarsRepo(store),
    deployments: deploymentsRepo(store),
    audit: auditRepo(store),
    idempotency: idempotencyRepo(store),
    tasks: tasksRepo(store),
    /** The readiness check's ping. */
    health: healthRepo(store),
    oauthClients: oauthClientsRepo(store),
    signingKeys: signingKeysRepo(store),
    requestStateKeys: requestStateKeysRepo(store),
    /** Facts about the database itself: the env-key check (db/env-key.ts). */
    serviceMeta: serviceMetaRepo(store),
    browserSessions: browserSessionsRepo(store),
    /** Values asked for on our own page (service_env_set_in_browser), between the call and the page. */
    browserInputs: browserInputsRepo(store),
    authorizations: authorizationsRepo(store),
    oauthGrants: oauthGrantsRepo(store, changes),
    /** Identity assertions (ID-JAG) already exchanged, and the subjects linked to users. */
    assertions: assertionsRepo(store),
    /** The server processes serving the database, and their leases. */
    processes: processesRepo(store),
    /** Sign-ins at an upstream OpenID Connect provider, between redirect and callback. */
    signInFlows: signInFlowsRepo(store),
    /** Accounts at upstream providers tied to users. */
    userIdentities: userIdentitiesRepo(store),
  }
}

/** The repositories inside one transaction (Repos.transaction): the same methods, on the transaction's connection. */
export type TxRepos = ReturnType<typeof buildRepos>

/**
 * The repositories on any store (each dialect's: sqlite/repos.ts, postgres/store.ts; the one opener: open.ts): each
 * call is guarded as the store needs (store.ts), and transactions get their own.
 */
export function reposOn(store: RootStore, changes: CredentialChanges) {
  // A store that runs transactions on itself (SQLite's one connection) gets the same transaction repositories each time.
  const built = new WeakMap<Store, TxRepos>()
  const txRepos = (tx: Store): TxRepos => {
    let repos = built.get(tx)
    if (!repos) built.set(tx, (repos = buildRepos(tx, changes)))
    return repos
  }
  return {
    ...store.guarded((inner) => buildRepos(inner, changes)),
    /** Moves whenever a credential may resolve differently; the credential cache watches it. */
    credentialChanges: changes,
    /**
     * Runs `fn` in one transaction with that transaction's repositories: all of its writes land, or none. `fn` must use
     * `tx`, not these repositories (on SQLite they wait for the transaction to end), and await nothing else.
     */
    async transaction<T>(fn: (tx: TxRepos) => Promise<T>): Promise<T> {
      // One connection under one lock (SQLite): nobody reads between a change noticed inside the transaction and its
      // commit. Elsewhere a change is announced only once committed (other processes would re-read the old rows).
      if (store.oneConnection) return store.transaction((tx) => fn(txRepos(tx)))
      let bumped = false
      const deferred: CredentialChanges = { bump: () => void (bumped = true), takeChanged: () => changes.takeChanged() }
      const result = await store.transaction((tx) => fn(buildRepos(tx, deferred)))
      if (bumped) await changes.bump()
      return result
    },
  }
}

export type Repos = ReturnType<typeof reposOn>
