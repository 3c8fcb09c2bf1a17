/**
 * Node 24.19 and later 24.x releases abort the process (`Assertion failed: (env) != nullptr`, SIGABRT) when the garbage
 * collector finalizes a statement of the SQLite addon (better-sqlite3 12) compiled against their headers: those
 * releases made `node::ObjectWrap` remove an environment cleanup hook where no environment may be current. It strikes
 * at an idle collection after ordinary queries, not only at exit. Node 22, 26 and 24 up to 24.18 are unaffected; the
 * project's `engines` and docs/decisions/node-versions.md say so, and a server started on an affected release says
 * it in its log rather than dying later without a word.
 */
export function sqliteAddonHazard(nodeVersion: string = process.versions.node): string | undefined {
  const [major, minor] = nodeVersion.split('.').map(Number)
  if (major !== 24 || minor === undefined || minor < 19) return undefined
  return `Node ${nodeVersion} can abort this process when it frees a SQLite statement (a known fault of Node 24.19 and later 24.x with native addons like the SQLite one): run the server on Node 26 or 22, or 24.18, or use PostgreSQL (docs/decisions/node-versions.md)`
}
