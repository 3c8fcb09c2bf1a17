import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import t from 'tap'
import { ROOT } from '../helpers/root.js'

/**
 * The README is short and sends readers to docs/: every relative link of the README and of docs/ must reach a file,
 * and a link to a heading (`page.md#anchor`) a heading of that page, as GitHub names its anchors.
 */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')
}

function headings(file: string): Set<string> {
  const anchors = new Set<string>()
  let fenced = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const m = fenced ? null : /^#{1,6} (.+)$/.exec(line)
    if (m) anchors.add(anchorOf(m[1]!))
  }
  return anchors
}

function pages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.md')).map((p) => join(ROOT, 'docs', p))
  return [join(ROOT, 'README.md'), ...docs]
}

t.test('every relative link of the README and docs/ reaches its file and heading', async (t) => {
  let checked = 0
  for (const page of pages()) {
    const text = readFileSync(page, 'utf8').replace(/```[\s\S]*?```/g, '')
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^(https?:|mailto:)/.test(target!)) continue
      const [path, anchor] = target!.split('#') as [string, string | undefined]
      const file = path === '' ? page : join(dirname(page), path)
      const where = `${relative(ROOT, page)} → ${target}`
      checked++
      if (!existsSync(file)) {
        t.fail(`${where}: no such file`)
        continue
      }
      if (anchor !== undefined && file.endsWith('.md')) t.ok(headings(file).has(anchor), `${where}: the heading exists`)
    }
  }
  t.ok(checked >= 20, `links checked (${checked})`)
})

t.test('anchors are named as GitHub names them', async (t) => {
  t.equal(anchorOf('Two eras on one endpoint'), 'two-eras-on-one-endpoint')
  t.equal(anchorOf('Metrics (Prometheus)'), 'metrics-prometheus')
  t.equal(anchorOf('Health, readiness and request ids'), 'health-readiness-and-request-ids')
})
