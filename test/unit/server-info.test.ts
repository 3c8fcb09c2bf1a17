import t from 'tap'
import { SERVER_ICON, serverInfoFor } from '../../src/mcp/server-info.js'
import { SERVER_NAME, SERVER_TITLE, SERVER_VERSION } from '../../src/version.js'

t.test('the server names itself as each revision defines Implementation', async (t) => {
  t.same(serverInfoFor('2025-03-26'), { name: SERVER_NAME, version: SERVER_VERSION }, '2025-03-26: name and version only')
  t.same(serverInfoFor('2025-06-18'), { name: SERVER_NAME, title: SERVER_TITLE, version: SERVER_VERSION }, '2025-06-18: a title')
  for (const version of ['2025-11-25', '2026-07-28'] as const) {
    const info = serverInfoFor(version)
    t.same(Object.keys(info).sort(), ['description', 'icons', 'name', 'title', 'version'], `${version}: description and icons`)
    t.same(info.icons, [SERVER_ICON])
    t.same(serverInfoFor(version, true), { name: SERVER_NAME, title: SERVER_TITLE, version: SERVER_VERSION }, `${version}: the brief identity`)
  }
})

t.test('the icon is a self-contained SVG without scripts or external references', async (t) => {
  const m = /^data:image\/svg\+xml;base64,([A-Za-z0-9+/]+={0,2})$/.exec(SERVER_ICON.src)
  t.ok(m, 'a base64 data: URI')
  const svg = Buffer.from(m![1]!, 'base64').toString('utf8')
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
  t.notMatch(svg, /<script|on[a-z]+=|href=|url\(/i, 'nothing executable or fetched')
})
