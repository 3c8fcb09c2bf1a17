import { createHash } from 'node:crypto'
import t from 'tap'
import { argumentsDigest, canonicalJson } from '../../src/lib/canonical-json.js'

t.test('canonicalJson: object keys sorted at every depth', async (t) => {
  t.equal(canonicalJson({ b: 1, a: 2 }), '{"a":2,"b":1}')
  t.equal(canonicalJson({ z: { y: 1, x: { w: 2, v: 3 } }, a: [] }), '{"a":[],"z":{"x":{"v":3,"w":2},"y":1}}')
  t.equal(canonicalJson({ B: 1, a: 2, _: 3, '10': 4, '9': 5 }), '{"10":4,"9":5,"B":1,"_":3,"a":2}', 'code-unit order, numeric-looking keys too')
  t.equal(canonicalJson({}), '{}')
  t.equal(canonicalJson({ 'quo"te': 1, 'new\nline': 2 }), '{"new\\nline":2,"quo\\"te":1}', 'keys are JSON-escaped')
})

t.test('canonicalJson: arrays keep their order, objects inside arrays are sorted', async (t) => {
  t.equal(canonicalJson([3, 1, 2]), '[3,1,2]')
  t.equal(canonicalJson([{ b: 1, a: 2 }, [{ d: 1, c: 2 }]]), '[{"a":2,"b":1},[{"c":2,"d":1}]]')
  t.not(canonicalJson([1, 2]), canonicalJson([2, 1]), 'order matters for arrays')
  t.equal(canonicalJson([]), '[]')
})

t.test('canonicalJson: undefined members are dropped, undefined array items become null', async (t) => {
  t.equal(canonicalJson({ a: 1, b: undefined }), '{"a":1}')
  t.equal(canonicalJson({ a: undefined }), '{}')
  t.equal(canonicalJson({ a: { b: undefined, c: 1 } }), '{"a":{"c":1}}', 'nested')
  t.equal(canonicalJson([1, undefined, 2]), '[1,null,2]', 'as JSON.stringify does for arrays')
  t.equal(canonicalJson(undefined), 'null')
  t.equal(canonicalJson({ a: null }), '{"a":null}', 'null is kept')
})

t.test('canonicalJson: scalars as JSON', async (t) => {
  t.equal(canonicalJson('x"y'), '"x\\"y"')
  t.equal(canonicalJson('世界'), '"世界"')
  t.equal(canonicalJson(42), '42')
  t.equal(canonicalJson(-0.5), '-0.5')
  t.equal(canonicalJson(true), 'true')
  t.equal(canonicalJson(null), 'null')
  t.equal(canonicalJson(Number.NaN), 'null', 'NaN as JSON does')
  // Equal to JSON.stringify for anything already in canonical order.
  const sorted = { a: [1, 'two', { b: null, c: false }], d: { e: 'f' } }
  t.equal(canonicalJson(sorted), JSON.stringify(sorted))
  t.same(JSON.parse(canonicalJson({ z: 1, a: { y: [1, { q: 2, p: 1 }] } })), { z: 1, a: { y: [1, { q: 2, p: 1 }] } }, 'valid JSON, same value')
})

t.test('argumentsDigest: SHA-256 base64url of the canonical JSON', async (t) => {
  const args = { app: 'web', env: { B: '2', A: '1' } }
  const expected = createHash('sha256').update('{"app":"web","env":{"A":"1","B":"2"}}').digest('base64url')
  t.equal(argumentsDigest(args), expected)
  t.match(argumentsDigest(args), /^[A-Za-z0-9_-]{43}$/, '43 base64url characters')
  t.equal(argumentsDigest(undefined), argumentsDigest({}), 'no arguments = empty arguments')
  t.equal(argumentsDigest(null), argumentsDigest({}), 'null arguments = empty arguments')
})

t.test('argumentsDigest: equal for reordered objects, different for different values', async (t) => {
  const a = { name: 'web', options: { region: 'eu', replicas: 2, tags: ['x', 'y'] } }
  const b = { options: { tags: ['x', 'y'], replicas: 2, region: 'eu' }, name: 'web' }
  t.equal(argumentsDigest(a), argumentsDigest(b), 'same meaning, other key order')
  t.equal(argumentsDigest({ ...a, extra: undefined }), argumentsDigest(a), 'an undefined member changes nothing')
  const variants: unknown[] = [
    { ...a, name: 'api' },
    { ...a, options: { ...a.options, replicas: 3 } },
    { ...a, options: { ...a.options, replicas: '2' } },
    { ...a, options: { ...a.options, tags: ['y', 'x'] } },
    { ...a, options: { ...a.options, tags: ['x'] } },
    { ...a, extra: null },
    { name: 'web' },
    { ...a, Name: 'web' },
  ]
  const digests = new Set([argumentsDigest(a), ...variants.map((v) => argumentsDigest(v))])
  t.equal(digests.size, variants.length + 1, 'every variant has its own digest')
  t.not(argumentsDigest({ a: '1' }), argumentsDigest({ a: 1 }), 'string vs number')
  t.not(argumentsDigest({ a: true }), argumentsDigest({ a: 'true' }), 'boolean vs string')
  t.not(argumentsDigest({ a: { b: 1 } }), argumentsDigest({ 'a.b': 1 }), 'nesting is not flattened')
})
