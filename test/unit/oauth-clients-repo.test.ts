// test-backends: both (one query written for both dialects; on PostgreSQL in the suite's second pass)
import t from 'tap'
import { unitRepos } from '../helpers/unit-repos.js'

const DOC = 'https://claude.example/oauth/client.json'
const FIELDS = { id: DOC, name: 'Claude', redirectUris: ['http://127.0.0.1:9999/callback'], grantTypes: ['authorization_code', 'refresh_token'], scope: 'mcp:read mcp:write' }

t.test('a document client is saved once, then updated only when its document changed', async (t) => {
  const repos = await unitRepos(t)
  const first = await repos.oauthClients.saveDocument(FIELDS, 1_000)
  t.equal(first.change, 'new')
  t.match(await repos.oauthClients.byId(DOC), { ...FIELDS, source: 'metadata_document', createdAt: 1_000, lastUsedAt: null })

  const again = await repos.oauthClients.saveDocument(FIELDS, 2_000)
  t.equal(again.change, 'same', 'the same document: nothing to change')
  t.equal(again.client.createdAt, 1_000, 'the row as it was')

  const changes: Array<[string, Partial<typeof FIELDS>]> = [
    ['name', { name: 'Claude (beta)' }],
    ['redirect URIs', { redirectUris: ['http://127.0.0.1:9999/callback', 'https://claude.example/cb'] }],
    ['redirect URIs in another order', { redirectUris: ['https://claude.example/cb', 'http://127.0.0.1:9999/callback'] }],
    ['grant types', { grantTypes: ['authorization_code'] }],
    ['scope', { scope: 'mcp:read' }],
  ]
  for (const [label, change] of changes) {
    const saved = await repos.oauthClients.saveDocument({ ...FIELDS, ...change }, 3_000)
    t.equal(saved.change, 'changed', `${label}: changed`)
    t.match(await repos.oauthClients.byId(DOC), { ...FIELDS, ...change, createdAt: 1_000 }, `${label}: stored, created when first seen`)
    await repos.oauthClients.saveDocument(FIELDS, 3_000)
  }
})

t.test('a registered client is never overwritten by a document', async (t) => {
  const repos = await unitRepos(t)
  const registered = await repos.oauthClients.create({ name: 'Registered', redirectUris: ['http://127.0.0.1:1/cb'], grantTypes: ['authorization_code'], scope: 'mcp:read' })
  await t.rejects(repos.oauthClients.saveDocument({ ...FIELDS, id: registered.id }, 1_000), /registered client/)
  t.match(await repos.oauthClients.byId(registered.id), { name: 'Registered', source: 'registration' })
})
