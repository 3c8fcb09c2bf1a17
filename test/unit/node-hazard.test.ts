import t from 'tap'
import { sqliteAddonHazard } from '../../src/db/sqlite/node-hazard.js'

// The releases whose ObjectWrap change aborts on the SQLite addon's statements (docs/decisions/node-versions.md).
t.test('Node 24.19 and later 24.x are named; the lines tested are not', async (t) => {
  for (const affected of ['24.19.0', '24.21.0', '24.30.2']) t.match(sqliteAddonHazard(affected), new RegExp(`Node ${affected.replace(/\./g, '\\.')} can abort`), `${affected} is named`)
  for (const fine of ['20.20.2', '22.23.3', '24.0.0', '24.18.1', '26.10.0', '25.0.0']) t.equal(sqliteAddonHazard(fine), undefined, `${fine} is fine`)
  t.match(sqliteAddonHazard('24.19.0'), /Node 26 or 22/, 'the message says what to do')
})
