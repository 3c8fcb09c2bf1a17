import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { openDatabase, type DatabaseHandle } from '../db/client.js'
import { createRepos, type Repos } from '../db/repos/index.js'
import { PLUGIN } from './names.js'

declare module 'fastify' {
  interface FastifyInstance {
    repos: Repos
    database: DatabaseHandle
  }
}

/** Opens SQLite (migrations applied), exposes the repositories, closes the connection on shutdown. */
const dbPlugin: FastifyPluginAsync<{ path: string; handle?: DatabaseHandle }> = async (fastify, opts) => {
  const handle = opts.handle ?? openDatabase(opts.path)
  fastify.decorate('database', handle)
  fastify.decorate('repos', createRepos(handle.db))
  fastify.addHook('onClose', async () => {
    if (!opts.handle) handle.close()
  })
}

export default fp(dbPlugin, { name: PLUGIN.db, fastify: '5.x', dependencies: [PLUGIN.http] })
