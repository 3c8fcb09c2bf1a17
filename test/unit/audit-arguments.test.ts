import t from 'tap'
import { auditArguments, REDACTED, secretPaths } from '../../src/plugins/tools/audit-arguments.js'

/** What a tool call's audit entries record of its arguments: all but the writeOnly ones, bounded in size. */

const schema = {
  type: 'object',
  properties: {
    app_id: { type: 'string' },
    value: { type: 'string', writeOnly: true },
    nested: { type: 'object', properties: { token: { type: 'string', writeOnly: true }, label: { type: 'string' } } },
  },
}

t.test('writeOnly arguments are redacted, at any depth; the others are kept as given', async (t) => {
  const paths = secretPaths(schema)
  t.same(paths, [['value'], ['nested', 'token']])
  const args = { app_id: 'app_1', value: 'hunter2', nested: { token: 'tok', label: 'x' } }
  t.same(auditArguments(args, paths), { app_id: 'app_1', value: REDACTED, nested: { token: REDACTED, label: 'x' } })
  t.same(args.value, 'hunter2', 'the call\'s own arguments are untouched')
  t.same(auditArguments({ app_id: 'app_1' }, paths), { app_id: 'app_1' }, 'an absent secret is not invented')
})

t.test('arguments too large for an entry are summarised, never cut mid-value', async (t) => {
  const recorded = auditArguments({ note: 'x'.repeat(10_000) }, []) as { omitted: string }
  t.match(recorded.omitted, /arguments of 100\d\d bytes, more than the 8192/)
})
