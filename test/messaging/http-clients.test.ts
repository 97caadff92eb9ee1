// Real HTTP clients on the ingest and reader listeners (issue 22 point 5): two publishes pipelined on one
// connection store nothing (uWS closes such a connection unanswered, so a client retrying them must not
// find the first stored already), and the reader tells a presented but unusable bearer token
// ('invalid token') from no credentials at all.
import net from 'node:net';
import t from 'tap';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';
import { countRows, publish, read, SENML, world } from './helpers.js';

const ts = await startTestService(t, AUTH_ENV);
const a = await world(ts, 'ws-clients');

/** Writes `data` on a fresh connection in one write; resolves with every byte received once the server closes it. */
function exchange(port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => { received += chunk; });
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    // A keep-alive connection that answered everything stays open: end it once both answers are in.
    socket.on('data', () => { if ((received.match(/HTTP\/1\.1 /g) ?? []).length >= 2) socket.end(); });
  });
}

function publishRequest(name: string, connection?: string): string {
  const body = JSON.stringify([{ n: name, v: 1 }]);
  return `POST /http/m/${a.ws}/c/${a.channel} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Client ${a.publisher.key}\r\n`
    + `Content-Type: ${SENML}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${connection ? `Connection: ${connection}\r\n` : ''}\r\n${body}`;
}

t.test('two publishes pipelined on one connection: nothing stored, so retrying them stores each once', async (t) => {
  const port = ts.service.ports.messaging as number;
  const before = await countRows(ts, a.channel);
  const answer = await exchange(port, publishRequest('first') + publishRequest('second'));
  t.equal(answer, '', 'uWS refuses asynchronous pipelining: the connection closes with neither answered');
  // A publish made after the refused pair is acknowledged once its batch committed: the pair, had it been
  // started, would have been queued before it and committed with it or earlier.
  t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'marker', v: 1 }])).status, 202);
  t.equal(await countRows(ts, a.channel), before + 1, 'only the marker is stored: neither pipelined publish was carried out');

  // The client does what RFC 9112 9.3.2 asks of it: retries the unanswered requests on a new connection.
  for (const name of ['first', 'second']) {
    t.equal((await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: name, v: 1 }])).status, 202, `${name} retried`);
  }
  const page = await read(ts, a.ws, a.channel, `Client ${a.publisher.key}`, 'limit=100');
  const names = (page.body.messages as { name: string }[]).map((m) => m.name).sort();
  t.same(names.filter((n) => n === 'first' || n === 'second'), ['first', 'second'], 'each stored once');

  // One request at a time on a keep-alive connection is unaffected.
  const sequential = await exchange(port, publishRequest('solo', 'close'));
  t.match(sequential, /^HTTP\/1\.1 202 /, 'a single request is answered');
});

t.test('two reads pipelined on one connection are refused the same way; the reader goes on answering', async (t) => {
  const port = ts.service.ports.reader as number;
  const get = `GET /${a.ws}/channels/${a.channel}/messages?limit=1 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Client ${a.publisher.key}\r\n\r\n`;
  const answer = await exchange(port, get + get);
  t.equal(answer, '', 'closed unanswered: nothing is ever answered out of order');
  t.equal((await read(ts, a.ws, a.channel, `Client ${a.publisher.key}`, 'limit=1')).status, 200);
});

t.test('the reader: an unusable bearer token is an invalid token, not missing authentication', async (t) => {
  const missing = await read(ts, a.ws, a.channel, null);
  t.same({ status: missing.status, body: missing.body }, { status: 401, body: { error: 'missing authentication' } });
  const garbage = await read(ts, a.ws, a.channel, 'Bearer not-a-token');
  t.same({ status: garbage.status, body: garbage.body }, { status: 401, body: { error: 'invalid token' } });
  const forged = await read(ts, a.ws, a.channel, 'Bearer svc_00000000000000000000000000000000_' + '0'.repeat(64));
  t.same({ status: forged.status, body: forged.body }, { status: 401, body: { error: 'invalid token' } });
  const admin = await adminToken(ts);
  const logout = await gql(ts.url(), 'mutation { logout }', {}, admin);
  t.equal(logout.body.data?.logout, true);
  const revoked = await read(ts, a.ws, a.channel, `Bearer ${admin}`);
  t.same({ status: revoked.status, body: revoked.body }, { status: 401, body: { error: 'invalid token' } }, 'a revoked session token');
  t.same((await read(ts, a.ws, a.channel, 'Client nope')).body, { error: 'invalid device key' });
});
