import t from 'tap'
import { paramHeadersOf, valueAt, X_MCP_HEADER } from '../../src/plugins/tools/param-headers.js'

const H = X_MCP_HEADER

function obj(properties: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'object', properties, ...extra }
}

t.test('the keyword is x-mcp-header', async (t) => {
  t.equal(H, 'x-mcp-header')
})

t.test('valid declarations: paths, names and types', async (t) => {
  t.same(paramHeadersOf(obj({ a: { type: 'string' } })), [], 'no declarations')
  t.same(paramHeadersOf({ type: 'object' }), [], 'no properties')
  t.same(
    paramHeadersOf(obj({
      region: { type: 'string', [H]: 'Region' },
      count: { type: 'integer', [H]: 'Count' },
      dryRun: { type: 'boolean', [H]: 'Dry-Run' },
      plain: { type: 'string' },
    })),
    [
      { path: ['region'], name: 'Region', type: 'string' },
      { path: ['count'], name: 'Count', type: 'integer' },
      { path: ['dryRun'], name: 'Dry-Run', type: 'boolean' },
    ],
    'string, integer and boolean, in schema order',
  )
  t.same(
    paramHeadersOf(obj({ target: obj({ zone: { type: 'string', [H]: 'Zone' }, deep: obj({ id: { type: 'integer', [H]: 'Deep-Id' } }) }) })),
    [
      { path: ['target', 'zone'], name: 'Zone', type: 'string' },
      { path: ['target', 'deep', 'id'], name: 'Deep-Id', type: 'integer' },
    ],
    'nested properties reached through "properties" alone',
  )
  t.same(paramHeadersOf(obj({ a: { type: 'string', [H]: "x!#$%&'*+-.^_`|~09AZaz" } })), [{ path: ['a'], name: "x!#$%&'*+-.^_`|~09AZaz", type: 'string' }], 'every RFC 9110 token character')
  t.same(paramHeadersOf(obj({ a: { type: 'string', [H]: 'A' }, b: { type: 'string', [H]: 'B' } })).map((d) => d.name), ['A', 'B'], 'distinct names')
  t.same(paramHeadersOf(obj({ a: { type: 'string', [H]: 'Same' } }, { required: ['a'], additionalProperties: false })).length, 1, 'other keywords beside are fine')
  // A property named like a keyword is still a property.
  t.same(paramHeadersOf(obj({ items: { type: 'string', [H]: 'Items' } })), [{ path: ['items'], name: 'Items', type: 'string' }], 'a property called "items"')
})

t.test('invalid declarations throw with the reason', async (t) => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['type number', obj({ price: { type: 'number', [H]: 'Price' } }), /x-mcp-header on property price: only string, integer and boolean properties may carry it, not "number"/],
    ['type object', obj({ o: { type: 'object', [H]: 'O' } }), /only string, integer and boolean properties may carry it, not "object"/],
    ['type array', obj({ l: { type: 'array', [H]: 'L' } }), /not "array"/],
    ['no type', obj({ u: { [H]: 'U' } }), /property u: only string, integer and boolean properties may carry it, not undefined/],
    ['type union', obj({ n: { type: ['string', 'null'], [H]: 'N' } }), /not \["string","null"\]/],
    ['under items', obj({ list: { type: 'array', items: { type: 'string', [H]: 'Item' } } }), /x-mcp-header on property list\.<items>: only properties reached through "properties" keys alone may carry it/],
    ['under items (object items)', obj({ list: { type: 'array', items: obj({ id: { type: 'string', [H]: 'Id' } }) } }), /property list\.<items>\.id: only properties reached through "properties"/],
    ['under prefixItems', obj({ list: { type: 'array', prefixItems: [{ type: 'string', [H]: 'P' }] } }), /<prefixItems>/],
    ['under anyOf', obj({ v: { anyOf: [{ type: 'string', [H]: 'V' }, { type: 'integer' }] } }), /property v\.<anyOf>: only properties reached through "properties"/],
    ['under oneOf', obj({ v: { oneOf: [obj({ x: { type: 'string', [H]: 'X' } })] } }), /<oneOf>\.x/],
    ['under allOf at the root', { type: 'object', allOf: [obj({ x: { type: 'string', [H]: 'X' } })] }, /property <allOf>\.x/],
    ['under not', obj({ v: { not: { type: 'string', [H]: 'V' } } }), /<not>/],
    ['under if/then', obj({ v: { if: { type: 'string' }, then: { type: 'string', [H]: 'V' } } }), /<then>/],
    ['under additionalProperties', obj({ m: { type: 'object', additionalProperties: { type: 'string', [H]: 'M' } } }), /<additionalProperties>/],
    ['under patternProperties', obj({ m: { type: 'object', patternProperties: { '^a': { type: 'string', [H]: 'M' } } } }), /<patternProperties>/],
    ['under $defs', { type: 'object', $defs: { s: { type: 'string', [H]: 'S' } }, properties: { a: { $ref: '#/$defs/s' } } }, /<\$defs>/],
    ['on the root', { type: 'object', [H]: 'Root' }, /x-mcp-header on the schema root/],
    ['duplicate, same case', obj({ a: { type: 'string', [H]: 'Region' }, b: { type: 'string', [H]: 'Region' } }), /x-mcp-header "Region" is declared twice \(also as "Region"\); names compare case-insensitively/],
    ['duplicate names differing only in case', obj({ a: { type: 'string', [H]: 'Region' }, b: { type: 'string', [H]: 'REGION' } }), /x-mcp-header "REGION" is declared twice \(also as "Region"\)/],
    ['duplicate across nesting', obj({ a: { type: 'string', [H]: 'zone' }, t: obj({ z: { type: 'string', [H]: 'Zone' } }) }), /"Zone" is declared twice/],
    ['a name with a space', obj({ a: { type: 'string', [H]: 'My Region' } }), /x-mcp-header on property a must be a non-empty HTTP header token, got "My Region"/],
    ['an empty name', obj({ a: { type: 'string', [H]: '' } }), /must be a non-empty HTTP header token, got ""/],
    ['a name with a colon', obj({ a: { type: 'string', [H]: 'a:b' } }), /got "a:b"/],
    ['a non-ASCII name', obj({ a: { type: 'string', [H]: 'Région' } }), /got "Région"/],
    ['a non-string name', obj({ a: { type: 'string', [H]: 5 } }), /got 5/],
    ['a null name', obj({ a: { type: 'string', [H]: null } }), /got null/],
  ]
  for (const [what, schema, message] of cases) {
    t.throws(() => paramHeadersOf(schema), message, what)
  }
})

t.test('valueAt: walks plain objects only', async (t) => {
  const args = { region: 'eu', count: 0, flag: false, none: null, target: { zone: 'b', deep: { id: 7 } }, list: [{ zone: 'x' }] }
  t.equal(valueAt(args, ['region']), 'eu')
  t.equal(valueAt(args, ['count']), 0, 'falsy values are returned')
  t.equal(valueAt(args, ['flag']), false)
  t.equal(valueAt(args, ['none']), null, 'null is returned as null')
  t.equal(valueAt(args, ['target', 'zone']), 'b')
  t.equal(valueAt(args, ['target', 'deep', 'id']), 7)
  t.same(valueAt(args, []), args, 'empty path: the arguments themselves')
  t.equal(valueAt(args, ['missing']), undefined)
  t.equal(valueAt(args, ['missing', 'deeper']), undefined, 'a missing step')
  t.equal(valueAt(args, ['region', 'length']), undefined, 'does not walk into strings')
  t.equal(valueAt(args, ['none', 'x']), undefined, 'does not walk into null')
  t.equal(valueAt(args, ['list', '0']), undefined, 'does not walk into arrays')
  t.equal(valueAt(undefined, ['region']), undefined)
  t.equal(valueAt(null, ['region']), undefined)
  t.equal(valueAt('text', ['length']), undefined)
})
