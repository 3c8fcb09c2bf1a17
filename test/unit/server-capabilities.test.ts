import t from 'tap'
import { ServerCapabilities } from '../../src/rpc/capabilities.js'
import { canElicitForm, declaresExtension } from '../../src/rpc/exchange.js'

const TASKS = 'io.modelcontextprotocol/tasks'

t.test('declare: per era, each era publishes only its own', async (t) => {
  const caps = new ServerCapabilities()
  caps.declare(['legacy'], 'tools', { listChanged: false })
  caps.declare(['modern'], 'tools', { listChanged: true })
  caps.declare(['legacy', 'modern'], 'logging', {})
  t.same(caps.of('legacy'), { tools: { listChanged: false }, logging: {} })
  t.same(caps.of('modern'), { tools: { listChanged: true }, logging: {} })
  t.notOk('extensions' in caps.of('legacy'), 'no extensions key without an extension')
})

t.test('declareExtension: under capabilities.extensions of its eras', async (t) => {
  const caps = new ServerCapabilities()
  caps.declare(['modern'], 'tools', { listChanged: true })
  caps.declareExtension(['modern'], TASKS)
  caps.declareExtension(['modern'], 'example.com/other', { version: 2 })
  t.same(caps.of('modern'), { tools: { listChanged: true }, extensions: { [TASKS]: {}, 'example.com/other': { version: 2 } } })
  t.same(caps.of('legacy'), {}, 'not in the legacy era')
  t.equal(caps.hasExtension('modern', TASKS), true)
  t.equal(caps.hasExtension('legacy', TASKS), false)
  t.equal(caps.hasExtension('modern', 'example.com/none'), false)
  t.throws(() => caps.declare(['legacy'], 'extensions', {}), /declare extensions with declareExtension/, 'extensions is not a plain capability')
})

t.test('duplicates are refused, per era', async (t) => {
  const caps = new ServerCapabilities()
  caps.declare(['modern'], 'tools', {})
  t.throws(() => caps.declare(['modern'], 'tools', { listChanged: true }), /capability tools is already declared for the modern era/)
  caps.declare(['legacy'], 'tools', {})
  caps.declare(['legacy', 'modern'], 'logging', {})
  t.throws(() => caps.declare(['modern'], 'logging', {}), /capability logging is already declared for the modern era/)
  t.throws(() => caps.declare(['legacy'], 'logging', {}), /capability logging is already declared for the legacy era/)
  caps.declareExtension(['modern'], TASKS)
  t.throws(() => caps.declareExtension(['modern'], TASKS), new RegExp(`extension ${TASKS} is already declared for the modern era`))
  caps.declareExtension(['legacy'], TASKS) // another era: fine
  t.same(caps.of('legacy'), { tools: {}, logging: {}, extensions: { [TASKS]: {} } })
})

t.test('declarations after publication are refused; the other era stays open', async (t) => {
  const caps = new ServerCapabilities()
  caps.declare(['modern'], 'tools', {})
  const first = caps.of('modern')
  t.equal(caps.of('modern'), first, 'built once: the same object each time')
  t.throws(() => caps.declare(['modern'], 'logging', {}), /capability logging declared after the modern capabilities were published/)
  t.throws(() => caps.declareExtension(['modern'], TASKS), new RegExp(`extension ${TASKS} declared after the modern capabilities were published`))
  t.same(caps.of('modern'), { tools: {} }, 'nothing changed')
  caps.declare(['legacy'], 'logging', {})
  t.same(caps.of('legacy'), { logging: {} }, 'legacy was still open')
  t.throws(() => caps.declare(['legacy'], 'prompts', {}), /after the legacy capabilities were published/)
})

t.test('published objects are deeply frozen', async (t) => {
  const caps = new ServerCapabilities()
  const settings = { listChanged: true }
  caps.declare(['modern'], 'tools', settings)
  caps.declareExtension(['modern'], TASKS, { nested: { deep: 1 } })
  const published = caps.of('modern') as Record<string, any>
  t.ok(Object.isFrozen(published), 'top level')
  t.ok(Object.isFrozen(published.tools), 'a capability')
  t.ok(Object.isFrozen(published.extensions), 'extensions')
  t.ok(Object.isFrozen(published.extensions[TASKS]), 'an extension')
  t.ok(Object.isFrozen(published.extensions[TASKS].nested), 'deep inside an extension')
  t.throws(() => {
    'use strict'
    published.tools.listChanged = false
  }, TypeError, 'writing throws in strict mode')
  t.throws(() => {
    published.prompts = {}
  }, TypeError)
  t.equal(published.tools.listChanged, true)
  t.notOk('prompts' in published)
})

t.test('canElicitForm: elicitation {} or with a form object', async (t) => {
  t.equal(canElicitForm({ elicitation: {} }), true, '{} means form')
  t.equal(canElicitForm({ elicitation: { form: {} } }), true)
  t.equal(canElicitForm({ elicitation: { form: {}, url: {} } }), true)
  t.equal(canElicitForm({ elicitation: { url: {} } }), false, 'url only')
  t.equal(canElicitForm({}), false, 'nothing declared')
  t.equal(canElicitForm({ elicitation: null as unknown as {} }), false, 'null')
  t.equal(canElicitForm({ elicitation: true as unknown as {} }), false, 'not an object')
  t.equal(canElicitForm({ elicitation: { form: null as unknown as {} } }), false, 'form null')
  t.equal(canElicitForm({ elicitation: { form: true as unknown as {} } }), false, 'form not an object')
  t.equal(canElicitForm({ sampling: {} }), false, 'another capability')
})

t.test('declaresExtension: an object under capabilities.extensions', async (t) => {
  t.equal(declaresExtension({ extensions: { [TASKS]: {} } }, TASKS), true)
  t.equal(declaresExtension({ extensions: { [TASKS]: { any: 1 } } }, TASKS), true)
  t.equal(declaresExtension({ extensions: {} }, TASKS), false)
  t.equal(declaresExtension({}, TASKS), false)
  t.equal(declaresExtension({ extensions: { [TASKS]: true as unknown as {} } }, TASKS), false, 'true is not a declaration')
  t.equal(declaresExtension({ extensions: { [TASKS]: null as unknown as {} } }, TASKS), false, 'null')
  t.equal(declaresExtension({ extensions: { [TASKS]: [] as unknown as {} } }, TASKS), false, 'an array')
  t.equal(declaresExtension({ extensions: { 'io.modelcontextprotocol/other': {} } }, TASKS), false, 'another extension')
  t.equal(declaresExtension({ experimental: { [TASKS]: {} } }, TASKS), false, 'experimental is not extensions')
  t.equal(declaresExtension({ extensions: { [TASKS.toUpperCase()]: {} } }, TASKS), false, 'ids are case-sensitive')
})
