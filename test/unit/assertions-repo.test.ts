// test-backends: both (the replay check is each dialect's primary key; on PostgreSQL in the suite's second pass)
import t from 'tap'
import { unitRepos } from '../helpers/unit-repos.js'

const ISSUER = 'https://idp.example.com'

t.test('an assertion is remembered once per issuer and jti, until it expires', async (t) => {
  const repos = await unitRepos(t)
  const row = { issuer: ISSUER, jti: 'j-1', expiresAt: 2_000 }
  t.equal(await repos.assertions.remember(row), true, 'first use')
  t.equal(await repos.assertions.remember(row), false, 'the same issuer and jti again')
  t.equal(await repos.assertions.remember({ ...row, issuer: 'https://other.example' }), true, 'the same jti from another issuer is another assertion')
  t.equal(await repos.assertions.purge(1_999), 0, 'nothing has expired yet')
  t.equal(await repos.assertions.purge(2_000), 2, 'expired ones are forgotten')
  t.equal(await repos.assertions.remember(row), true, 'and could be remembered again (its exp refuses it anyway)')
})

t.test('inside a transaction that rolls back, the assertion is not used up', async (t) => {
  const repos = await unitRepos(t)
  const row = { issuer: ISSUER, jti: 'j-2', expiresAt: 5_000 }
  await t.rejects(repos.transaction(async (tx) => {
    t.equal(await tx.assertions.remember(row), true)
    throw new Error('a later step refused')
  }))
  t.equal(await repos.assertions.remember(row), true, 'still unused after the rollback')
})
