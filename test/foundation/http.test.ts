import net from 'node:net';
import t from 'tap';
import { request } from 'undici';
import { createHttpServer } from '../../src/http/server.js';
import { json } from '../../src/http/types.js';
import { startTestService, testLogger } from '../helpers/service.js';

function rawRequest(port: number, text: string, { endAfterWrite = false } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(text);
      if (endAfterWrite) socket.end();
    });
    let data = '';
    socket.on('data', (d) => (data += d));
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy());
  });
}

t.test('a started service answers health, 404 JSON and 413 JSON', async (t) => {
  const { url, service } = await startTestService(t, { SVC_GRAPHQL_BODY_LIMIT_BYTES: '2048' });
  const health = await request(`${url()}/health`);
  t.equal(health.statusCode, 200);
  // Overall status may read 'degraded' on a loaded machine (a worker thread slow to start); readiness is
  // what the database and migrations decide.
  t.match(await health.body.json(), { status: /^(ok|degraded)$/, database: { status: 'ok' }, migrations: { status: 'ok' } });
  const live = await request(`${url()}/health/live`);
  t.same(await live.body.json(), { status: 'ok' });

  const missing = await request(`${url()}/no/such/route`, { method: 'DELETE' });
  t.equal(missing.statusCode, 404);
  t.equal(missing.headers['content-type'], 'application/json');
  t.same(await missing.body.json(), { error: 'no route for DELETE /no/such/route' });
  // A route that exists for other methods says which: 405 with Allow, not 404.
  const wrongMethod = await request(`${url()}/health/live`, { method: 'DELETE' });
  t.equal(wrongMethod.statusCode, 405);
  t.equal(wrongMethod.headers.allow, 'GET, HEAD');
  t.same(await wrongMethod.body.json(), { error: 'method not allowed: DELETE; allowed: GET, HEAD' });
  // HEAD answers what GET would, without the body; the connection stays usable for the next request.
  const get = await request(`${url()}/health/live`);
  const getBody = await get.body.text();
  const head = await request(`${url()}/health/live`, { method: 'HEAD' });
  t.equal(head.statusCode, 200);
  t.equal(head.headers['content-length'], String(Buffer.byteLength(getBody)), 'with the length the GET body has');
  t.equal(head.headers['content-type'], 'application/json');
  t.equal(await head.body.text(), '', 'and no body');
  t.equal((await request(`${url()}/no/such/route`, { method: 'HEAD' })).statusCode, 404);
  t.same(await (await request(`${url()}/health/live`)).body.json(), { status: 'ok' }, 'a GET after the HEADs is answered');

  const big = JSON.stringify({ query: `{ health } #${'x'.repeat(4096)}` });
  const tooLarge = await request(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
  t.equal(tooLarge.statusCode, 413);
  t.same(await tooLarge.body.json(), { error: 'request body exceeds the limit of 2048 bytes' });

  // Without a Content-Length the limit is enforced while reading the chunks.
  const port = service.ports.http as number;
  const chunked = await rawRequest(port,
    'POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n'
    + `1000\r\n${'y'.repeat(4096)}\r\n0\r\n\r\n`);
  t.match(chunked, /^HTTP\/1.1 413 /);
  t.match(chunked, '{"error":"request body exceeds the limit of 2048 bytes"}');

  // A body arriving in several TCP segments (several data callbacks) is joined whole, in order.
  const body = JSON.stringify({ query: `{ __typename } #${'z'.repeat(1500)}` });
  const pieces = [body.slice(0, 10), body.slice(10, 800), body.slice(800)];
  const joined = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', async () => {
      socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`);
      for (const piece of pieces) {
        await new Promise((r) => setTimeout(r, 30));
        socket.write(piece);
      }
    });
    let data = '';
    socket.on('data', (d) => (data += d));
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
  });
  t.match(joined, /^HTTP\/1.1 200 /);
  t.match(joined, '{"data":{"__typename":"Query"}}', 'the pieces made one body');
});

t.test('an aborted upload does not crash the listener or leak the request', async (t) => {
  const { url, service } = await startTestService(t);
  const port = service.ports.http as number;
  await new Promise<void>((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"query":');
      setTimeout(() => {
        socket.destroy();
        resolve();
      }, 100);
    });
  });
  await new Promise((r) => setTimeout(r, 100));
  const after = await request(`${url()}/health/live`);
  t.equal(after.statusCode, 200, 'still serving');
  await after.body.dump();
});

t.test('a malformed percent-escape in a path parameter is a 400, not a crash', async (t) => {
  const server = createHttpServer('escapes', testLogger());
  server.route('GET', '/things/:id', (req) => json(200, { id: req.params[0] }));
  server.route('POST', '/things/:id', (req) => json(200, { id: req.params[0], bytes: req.body.length }), { bodyLimit: 1024 });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${port}`;
  for (const bad of ['%zz', '%E0%A4%A', 'ok%']) {
    const got = await request(`${base}/things/${bad}`);
    t.equal(got.statusCode, 400, `GET ${bad}`);
    t.same(await got.body.json(), { error: 'malformed percent-encoding in the request path' });
  }
  // With a body on the wire: answered without reading it, and the connection is closed so the body is
  // not taken for the next request.
  const raw = await rawRequest(port, 'POST /things/%zz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n0123456789');
  t.match(raw, /^HTTP\/1\.1 400 Bad Request\r\n/);
  t.match(raw, /malformed percent-encoding in the request path/);
  const decoded = await request(`${base}/things/a%20b%2Fc`, { method: 'POST', body: 'xy' });
  t.same(await decoded.body.json(), { id: 'a b/c', bytes: 2 }, 'well-formed escapes are decoded');
  const alive = await request(`${base}/things/still-here`);
  t.same(await alive.body.json(), { id: 'still-here' }, 'the listener still serves');
});

t.test('a coded body is refused with 415 before it is read; identity is plain', async (t) => {
  const server = createHttpServer('codings', testLogger());
  server.route('POST', '/echo', (req) => json(200, { text: req.body.toString() }), { bodyLimit: 1024 });
  server.route('GET', '/echo', (req) => json(200, { coding: req.headers['content-encoding'] ?? null }));
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${port}`;
  for (const coding of ['gzip', 'br', 'gzip, identity', 'x'.repeat(200)]) {
    const got = await request(`${base}/echo`, { method: 'POST', headers: { 'content-encoding': coding }, body: 'plain text' });
    t.equal(got.statusCode, 415, coding.slice(0, 20));
    t.equal(got.headers['accept-encoding'], 'identity', 'naming the coding it reads');
    t.same(await got.body.json(), { error: `content encoding '${coding.slice(0, 40)}' is not supported; send the body uncompressed` });
  }
  for (const coding of ['identity', 'Identity ']) {
    const got = await request(`${base}/echo`, { method: 'POST', headers: { 'content-encoding': coding }, body: 'plain text' });
    t.same(await got.body.json(), { text: 'plain text' }, `'${coding}' is the body as sent`);
  }
  // The refused body is still on the wire: the connection is closed rather than the body parsed as a request.
  const raw = await rawRequest(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 26\r\n\r\nGET /echo HTTP/1.1\r\nX: y\r\n\r\n');
  t.match(raw, /^HTTP\/1\.1 415 /);
  t.notMatch(raw, /HTTP\/1\.1 200/, 'the body was not served as a second request');
  const get = await request(`${base}/echo`, { headers: { 'content-encoding': 'gzip' } });
  t.equal(get.statusCode, 200, 'a route without a body does not care');
  await get.body.dump();
});

t.test('a body framed two ways is refused, not split into a body and a smuggled request', async (t) => {
  const server = createHttpServer('framing', testLogger());
  let served = 0;
  server.route('POST', '/echo', (req) => json(200, { text: req.body.toString(), type: req.headers['content-type'] ?? null }), { bodyLimit: 1024 });
  server.route('GET', '/secret', () => {
    served++;
    return json(200, { secret: true });
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close());
  // A proxy forwarding by the last length sends all 34 bytes; uWS alone would read 3 and serve the rest.
  const smuggled = 'GET /secret HTTP/1.1\r\nHost: x\r\n\r\n';
  const conflicting = await rawRequest(port, `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: ${3 + smuggled.length}\r\n\r\nabc${smuggled}`);
  t.equal(conflicting, '', 'the connection is closed without an answer (uWS would go on to parse what follows)');
  t.equal(served, 0, 'the smuggled request was not served');
  const onGet = await rawRequest(port, `GET /secret HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: ${3 + smuggled.length}\r\n\r\nabc${smuggled}`);
  t.equal(onGet, '', 'on a route that reads no body too');
  t.equal(served, 0);
  const same = await rawRequest(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc');
  t.match(same, /^HTTP\/1\.1 200 /, 'the same length twice is one framing');
  // uWS de-chunks 'gzip, chunked' and would hand over the gzip bytes as they are.
  const coded = await rawRequest(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
  t.match(coded, /^HTTP\/1\.1 501 /);
  t.match(coded, "transfer coding 'gzip, chunked' is not supported; send the body chunked or with a Content-Length");
  const chunked = await rawRequest(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
  t.match(chunked, '{"text":"abc","type":null}', 'chunked alone is read');
  const twoTypes = await rawRequest(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Type: application/json\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx');
  t.match(twoTypes, '{"text":"x","type":"text/plain"}', 'a repeated header reads as its first value, as on routes without a body');
  const alive = await request(`http://127.0.0.1:${port}/secret`);
  t.same(await alive.body.json(), { secret: true }, 'the listener serves on');
});

t.test('large replies respect backpressure and arrive whole', async (t) => {
  const server = createHttpServer('test', testLogger());
  const payload = Buffer.alloc(16 * 1024 * 1024);
  for (let i = 0; i < payload.length; i++) payload[i] = i % 251;
  server.route('GET', '/big', () => ({ status: 200, body: payload }));
  server.route('GET', '/stream', () => ({
    status: 200,
    body: (async function* () {
      for (let i = 0; i < 2000; i++) yield `${JSON.stringify({ line: i, pad: 'p'.repeat(2000) })}\n`;
    })(),
  }));
  server.route('GET', '/json', () => json(200, { ok: true }));
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close());

  // A slow reader: pause the socket so the server's writes hit backpressure.
  const received = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => socket.write('GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    socket.on('data', (d) => {
      chunks.push(d);
      socket.pause();
      setTimeout(() => socket.resume(), 1);
    });
    socket.on('end', () => resolve(Buffer.concat(chunks)));
    socket.on('error', reject);
  });
  const bodyStart = received.indexOf('\r\n\r\n') + 4;
  t.ok(payload.equals(received.subarray(bodyStart)), 'the 16 MiB body arrived intact');

  const streamed = await request(`http://127.0.0.1:${port}/stream`);
  const lines = (await streamed.body.text()).trim().split('\n');
  t.equal(lines.length, 2000);
  t.same(JSON.parse(lines[1999] as string).line, 1999);
  t.equal(server.inFlight, 0);
});

t.test('health reports the database unreachable with 503, and ready again when it is back', async (t) => {
  const { url, db } = await startTestService(t);
  const postgres = (await import('postgres')).default;
  const { adminUrl } = await import('../helpers/database.js');
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
  t.teardown(async () => {
    await admin.unsafe(`alter database ${db.name} allow_connections true`);
    await admin.end();
  });
  await admin.unsafe(`alter database ${db.name} allow_connections false`);
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${db.name} and pid <> pg_backend_pid()`;
  const down = await request(`${url()}/health`);
  t.equal(down.statusCode, 503);
  t.match(await down.body.json(), { status: 'error', database: { status: 'error' } });
  await admin.unsafe(`alter database ${db.name} allow_connections true`);
  let status = 0;
  for (let i = 0; i < 50 && status !== 200; i++) {
    const res = await request(`${url()}/health`);
    status = res.statusCode;
    await res.body.dump();
    if (status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(status, 200, 'ready again once the database accepts connections');
});
