import { readFileSync } from 'node:fs'
import t from 'tap'
import { SETTINGS } from '../../src/config.js'
import { join } from 'node:path'
import { ROOT } from '../helpers/root.js'

// Operators configure the server from docs/configuration.md (linked from the README): every setting must be in its
// table, with its flag, and the table must name no setting that does not exist.
t.test('the configuration table lists every setting and only those', async (t) => {
  const readme = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5))
  const rows = section.split('\n').filter((l) => l.startsWith('| `SERVICE_'))
  const documented = new Map(rows.map((r) => {
    const cells = r.split('|').map((c) => c.trim())
    return [cells[1]!.replace(/`/g, ''), cells[2]!.replace(/`/g, '')] as const
  }))
  for (const s of SETTINGS) {
    t.ok(documented.has(s.env), `${s.env} is documented`)
    if (documented.has(s.env)) t.equal(documented.get(s.env), s.flag, `${s.env} is documented with its flag ${s.flag}`)
  }
  const known = new Set(SETTINGS.map((s) => s.env))
  t.same([...documented.keys()].filter((env) => !known.has(env)), [], 'no documented setting is unknown')
})
