/**
 * PLACEHOLDER until the fetcher lands: the real module (the safe fetcher, its cache and policy) replaces this file
 * whole. It keeps the branch building: the authorization server constructs the resolver here, and tests hand in
 * their own. Any document a client names is refused until then.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../config.js'
import type { Clock } from '../../lib/clock.js'
import type { LimitsStore } from '../../limits/store.js'
import type { ClientDocumentResolver } from './types.js'

export type { ClientDocument, ClientDocumentResolver } from './types.js'

export function clientDocumentResolver(_options: { config: Config; clock: Clock; limits: LimitsStore; log: FastifyBaseLogger }): ClientDocumentResolver {
  return {
    isDocumentUrl: (clientId) => /^https?:\/\//i.test(clientId),
    resolve: () => {
      throw new Error('client documents: fetcher not merged')
    },
  }
}
