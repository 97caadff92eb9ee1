// The broker's side of an MQTT WebSocket, against a stand-in for the uWS socket: writes wait while the
// socket holds too much unsent, the socket's end reaches the broker, and the broker's end closes the socket.
import t from 'tap';
import type { UwsWebSocket } from '../../src/http/uws.js';
import { WebSocketStream } from '../../src/mqtt/websocket.js';

function fakeSocket() {
  const sent: Buffer[] = [];
  const ended: number[] = [];
  let buffered = 0;
  const socket = {
    send: (chunk: Buffer) => {
      sent.push(chunk);
      buffered += chunk.length;
      return 1;
    },
    getBufferedAmount: () => buffered,
    end: (code: number) => ended.push(code),
  };
  return { socket: socket as unknown as UwsWebSocket<never>, sent, ended, flush: () => { buffered = 0; } };
}

t.test('a write waits for the drain while the socket holds more than its high-water mark', async (t) => {
  const s = fakeSocket();
  const stream = new WebSocketStream(s.socket as never);
  let done = 0;
  stream.write(Buffer.alloc(100), () => done++);
  await new Promise((r) => setImmediate(r));
  t.equal(done, 1, 'under the mark: done at once');
  stream.write(Buffer.alloc(300 * 1024), () => done++);
  await new Promise((r) => setImmediate(r));
  t.equal(done, 1, 'over it: the broker waits');
  s.flush();
  stream.drained();
  await new Promise((r) => setImmediate(r));
  t.equal(done, 2, 'drained: the write completes');
  t.equal(stream.bytesWritten, 100 + 300 * 1024);
  t.equal(s.sent.length, 2);
});

t.test('frames in, the socket ending, and the broker ending', async (t) => {
  const s = fakeSocket();
  const stream = new WebSocketStream(s.socket as never);
  const got: Buffer[] = [];
  stream.on('data', (b: Buffer) => got.push(b));
  const frame = new Uint8Array([0x10, 0x02, 0x00, 0x00]).buffer;
  stream.received(frame);
  new Uint8Array(frame).fill(0xff);
  await new Promise((r) => setImmediate(r));
  t.same(got, [Buffer.from([0x10, 0x02, 0x00, 0x00])], 'copied: uWS reuses the frame memory');
  t.equal(stream.bytesRead, 4);

  const ended = new Promise((r) => stream.once('close', r));
  stream.socketEnded();
  await ended;
  t.same(s.ended, [], 'the socket ended by itself: not ended again');
  await new Promise<void>((resolve) => stream.write(Buffer.from('x'), (err) => {
    t.ok(err, 'a write after the socket ended fails');
    resolve();
  }));

  const other = fakeSocket();
  const byBroker = new WebSocketStream(other.socket as never);
  byBroker.destroy();
  byBroker.destroy();
  t.same(other.ended, [1001], 'the broker closing the connection closes the socket once');
});
