import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { OWNER_KEY, startServer } from '../helpers/server.js'

/**
 * A body above SERVICE_MAX_BODY_BYTES is refused (413) on its Content-Length, before it is read, and the connection
 * closes. CI once saw nginx answer 502 instead: the server destroyed the socket as soon as the 413 was written, and the
 * body nginx was still sending made the kernel reset the connection before nginx read the answer. Now the server
 * lingers: it sends its answer and its FIN, and discards what still arrives until the client closes or
 * SERVICE_LINGER_MS passes.
 */

const MAX_BODY = 16 * 1024

/** Sends a request declaring a body four times the limit, then keeps sending it for `sendMs` after the answer. */
async function refusedWhileSending(t: Test, lingerMs: number, sendMs: number) {
  const server = await startServer(t, { config: { maxBodyBytes: MAX_BODY, lingerMs } })
  // Half-open, as a proxy is: the server's FIN does not stop it from sending the rest of the body it was given.
  const port = Number(new URL(server.url).port)
  const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
  const closed = new Promise((resolve) => socket.once('close', resolve))
  const errors: string[] = []
  socket.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message))
  await new Promise((resolve) => socket.once('connect', resolve))
  let received = ''
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
  socket.write([
    'POST /mcp HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    `Authorization: Bearer ${OWNER_KEY}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `Content-Length: ${MAX_BODY * 4}`,
    '', '',
  ].join('\r\n'))
  socket.write('x'.repeat(1024))
  const until = Date.now() + 5000
  while (!received.includes('\r\n\r\n') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  // The client goes on sending the body.
  const chunk = 'x'.repeat(4096)
  const stop = Date.now() + sendMs
  let sent = 1024
  while (Date.now() < stop && !socket.destroyed && sent < MAX_BODY * 4 - chunk.length) {
    socket.write(chunk)
    sent += chunk.length
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  socket.end()
  await closed
  return { status: received.slice(0, 12), received, errors }
}

t.test('a refused body still arriving is read and discarded: no reset before the client is done', async (t) => {
  const { status, received, errors } = await refusedWhileSending(t, 2000, 300)
  t.equal(status, 'HTTP/1.1 413', 'the refusal arrived')
  t.match(received, /"code":"PAYLOAD_TOO_LARGE"/, 'in the service error shape')
  t.match(received.toLowerCase(), /connection: close/, 'and the connection closes after it')
  t.strictSame(errors, [], 'no reset while the client went on sending')
})

t.test('without lingering (SERVICE_LINGER_MS=0) the same client is reset: what lingering prevents', async (t) => {
  const { status, errors } = await refusedWhileSending(t, 0, 300)
  t.equal(status, 'HTTP/1.1 413')
  t.ok(errors.some((code) => code === 'ECONNRESET' || code === 'EPIPE'), `reset (${errors.join(', ')})`)
})
