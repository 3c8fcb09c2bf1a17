import type { ResolveHook } from 'node:module'

/**
 * The module hook of a shared test process (shared-process.ts): a test file's `import t from 'tap'` resolves to
 * shared-process-tap.ts with the file's URL in the query, which hands the file the subtest it runs in. The process
 * imports each test file with FILE_MARK in its URL's query, which is how its imports are told from every other
 * module's: helpers, and tap's own modules, get tap itself.
 */
export const FILE_MARK = 'shared-process-file'

export const resolve: ResolveHook = (specifier, context, nextResolve) => {
  if (specifier === 'tap' && context.parentURL && new URL(context.parentURL).searchParams.has(FILE_MARK)) {
    const url = new URL('./shared-process-tap.js', import.meta.url)
    url.searchParams.set('file', context.parentURL)
    return { url: url.href, shortCircuit: true }
  }
  return nextResolve(specifier, context)
}
