/**
 * Preloaded into the benchmark's server child (`node --expose-gc --import tsx --import ./scripts/bench/probe.ts …`).
 * Answers `{ type: 'memory' }` on the IPC channel with process.memoryUsage() taken after a full GC, so the benchmark
 * can read the server's heap from outside without touching src/. Never loaded in production.
 */
process.channel?.unref()
process.on('message', (message: unknown) => {
  if (typeof message !== 'object' || message === null || (message as { type?: unknown }).type !== 'memory') return
  const collected = typeof globalThis.gc === 'function'
  if (collected) {
    // Two passes: the first can leave objects reachable only from finalizers or weak references of the previous one.
    globalThis.gc!()
    globalThis.gc!()
  }
  process.send?.({ type: 'memory', gc: collected, ...process.memoryUsage() })
})
