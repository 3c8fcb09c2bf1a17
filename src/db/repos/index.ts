import type { Db } from '../client.js'
import { apiKeysRepo } from './api-keys.js'
import { appsRepo } from './apps.js'
import { auditRepo } from './audit.js'
import { authorizationsRepo } from './authorizations.js'
import { browserSessionsRepo } from './browser-sessions.js'
import { credentialChanges } from './credential-changes.js'
import { deploymentsRepo } from './deployments.js'
import { envVarsRepo } from './env-vars.js'
import { healthRepo } from './health.js'
import { idempotencyRepo } from './idempotency.js'
import { membershipsRepo } from './memberships.js'
import { oauthClientsRepo } from './oauth-clients.js'
import { oauthGrantsRepo } from './oauth-grants.js'
import { organizationsRepo } from './organizations.js'
import { requestStateKeysRepo } from './request-state-keys.js'
import { serviceMetaRepo } from './service-meta.js'
import { sessionsRepo } from './sessions.js'
import { signingKeysRepo } from './signing-keys.js'
import { tasksRepo } from './tasks.js'
import { usersRepo } from './users.js'

/** Every query the server runs lives in one of these modules. */
export function createRepos(db: Db) {
  const changes = credentialChanges(db)
  return {
    /** Moves whenever a credential may resolve differently; the credential cache watches it. */
    credentialChanges: changes,
    organizations: organizationsRepo(db),
    users: usersRepo(db, changes),
    memberships: membershipsRepo(db, changes),
    apiKeys: apiKeysRepo(db, changes),
    sessions: sessionsRepo(db),
    apps: appsRepo(db),
    envVars: envVarsRepo(db),
    deployments: deploymentsRepo(db),
    audit: auditRepo(db),
    idempotency: idempotencyRepo(db),
    tasks: tasksRepo(db),
    /** The readiness check's ping. */
    health: healthRepo(db),
    oauthClients: oauthClientsRepo(db),
    signingKeys: signingKeysRepo(db),
    requestStateKeys: requestStateKeysRepo(db),
    /** Facts about the database itself: the env-key check (db/env-key.ts). */
    serviceMeta: serviceMetaRepo(db),
    browserSessions: browserSessionsRepo(db),
    authorizations: authorizationsRepo(db),
    oauthGrants: oauthGrantsRepo(db, changes),
    /** Runs `fn` in one transaction: all of its writes land, or none. */
    transaction<T>(fn: () => T): T {
      return db.transaction(fn)
    },
  }
}

export type Repos = ReturnType<typeof createRepos>
