/**
 * Preloaded into the benchmark's server child (`node --expose-gc --import ./scripts/bench/probe.mjs …`).
 * Answers `{ type: 'memory' }` on the IPC channel with process.memoryUsage() taken after a full GC, so the benchmark
 * can read the server's heap from outside without touching src/. Never loaded in production. Plain JavaScript, so the
 * child runs the built server (dist/) with no TypeScript loader in the way.
 */
process.channel?.unref()
process.on('message', (message) => {
  if (typeof message !== 'object' || message === null || message.type !== 'memory') return
  const collected = typeof globalThis.gc === 'function'
  if (collected) {
    // Two passes: the first can leave objects reachable only from finalizers or weak references of the previous one.
    globalThis.gc()
    globalThis.gc()
  }
  process.send?.({ type: 'memory', gc: collected, ...process.memoryUsage() })
})
