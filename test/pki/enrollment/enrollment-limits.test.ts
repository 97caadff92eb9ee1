// The enrollment listener's abuse limits with real clients: per-entity and per-tenant enrollment windows
// (429 + Retry-After, recovered once the window passes), the per-address connection cap, slow clients (a
// handshake or headers that never finish) cut at their timeouts so their slots come back, the CSR body
// limit, and IPv6 addresses counted by their prefix.
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { adminToken, login, startAuthService } from '../../helpers/auth.js';
import { curl, curlJson, enrollmentEnv } from '../../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { createRateLimiter } from '../../../src/http/rate-limit.js';
import { createConnectionCaps } from '../../../src/pki/enrollment/limits.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const closed = (s: Socket) => new Promise<number>((resolve) => {
  const at = Date.now();
  if (s.destroyed) resolve(0);
  s.once('close', () => resolve(Date.now() - at));
});

t.test('enrollment windows per entity and per tenant', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, {
    SVC_RATE_LIMIT_ENABLED: 'true',
    SVC_PKI_ENROLLMENT_ENTITY_RATE_LIMIT: '2', SVC_PKI_ENROLLMENT_ENTITY_RATE_WINDOW_SECS: '4',
    SVC_PKI_ENROLLMENT_TENANT_RATE_LIMIT: '3', SVC_PKI_ENROLLMENT_TENANT_RATE_WINDOW_SECS: '4',
  });
  const ts = await startAuthService(t, env);
  const url = `https://127.0.0.1:${ts.service.ports.enrollment}/pki/enroll`;
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = async (name: string) => {
    const id = await createEntity(ts, admin, { kind: 'device', name, tenantId });
    const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: id })).createSharedKey.key;
    return ['-H', `authorization: Bearer ${(await login(ts, id, key, { kind: 'shared_key' })).token}`];
  };
  const one = await device('one');
  const two = await device('two');
  let n = 0;
  const enroll = (who: string[]) => curlJson(url, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: `k${n++}` }, who);

  t.equal((await enroll(one)).status, 201);
  t.equal((await enroll(one)).status, 201);
  const limited = await enroll(one);
  t.equal(limited.status, 429, 'the third enrollment of one entity in its window');
  t.match(limited.json.error, 'rate limit exceeded');
  t.match(limited.json.error, 'per entity');
  const retryAfter = Number(limited.headers['retry-after']);
  t.ok(retryAfter >= 1 && retryAfter <= 4, `Retry-After ${retryAfter}`);
  t.equal((await enroll(two)).status, 201, 'another entity of the tenant still enrolls');
  const tenantFull = await enroll(two);
  t.equal(tenantFull.status, 429, 'the tenant window is full (3 enrollments counted)');
  t.match(tenantFull.json.error, 'per tenant');
  await sleep(Math.max(retryAfter, Number(tenantFull.headers['retry-after'])) * 1000 + 200);
  t.equal((await enroll(one)).status, 201, 'recovered once the window passed');
});

t.test('connection caps and slow clients', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, {
    SVC_PKI_ENROLLMENT_MAX_CONNECTIONS_PER_IP: '2',
    SVC_PKI_ENROLLMENT_HANDSHAKE_TIMEOUT_SECS: '1',
    SVC_PKI_ENROLLMENT_HTTP_HEADER_TIMEOUT_SECS: '1',
    SVC_PKI_ENROLLMENT_MAX_CSR_BYTES: '1024',
    // SVC_RATE_LIMIT_ENABLED is false here (the test default): the windows do not apply.
    SVC_PKI_ENROLLMENT_ENTITY_RATE_LIMIT: '1',
  });
  const ts = await startAuthService(t, env);
  const port = ts.service.ports.enrollment!;
  const cacerts = `https://127.0.0.1:${port}/.well-known/est/cacerts`;
  const open = () => new Promise<Socket>((resolve) => {
    const s = tcpConnect(port, '127.0.0.1', () => resolve(s));
    s.on('error', () => undefined);
  });

  await t.test('a slow-loris handshake is cut at the handshake timeout and gives its slot back', async (t) => {
    const held = [await open(), await open()];
    await sleep(100);
    const third = await open();
    const cut = await closed(third);
    t.ok(cut < 500, `a third connection from the address is closed at once (${cut} ms)`);
    const refused = await curl(cacerts, serverCert, ['--max-time', '5']).catch((err: Error) => err);
    t.ok(refused instanceof Error, 'curl cannot get in while the cap is reached');
    const waited = await Promise.all(held.map(closed));
    for (const ms of waited) t.ok(ms < 3500, `a handshake that never starts is cut (${ms} ms)`);
    const r = await curl(cacerts, serverCert);
    t.equal(r.status, 200, 'the slots came back');
  });

  await t.test('headers that never finish are cut at the header timeout', async (t) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(serverCert), servername: 'localhost' });
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    socket.on('error', () => undefined);
    socket.write('POST /pki/enroll HTTP/1.1\r\nHost: x\r\n');
    const at = Date.now();
    const trickle = setInterval(() => socket.write('x-slow: y\r\n'), 200);
    await new Promise((resolve) => socket.once('close', resolve));
    clearInterval(trickle);
    const ms = Date.now() - at;
    t.ok(ms >= 800 && ms < 4000, `cut after ${ms} ms`);
    t.equal((await curl(cacerts, serverCert)).status, 200);
  });

  await t.test('with SVC_RATE_LIMIT_ENABLED=false the enrollment windows do not apply', async (t) => {
    const admin = await adminToken(ts);
    const device = await createEntity(ts, admin, { kind: 'device', name: 'unlimited', tenantId: await createTenant(ts, admin, 'acme') });
    const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key;
    const token = (await login(ts, device, key, { kind: 'shared_key' })).token;
    for (const k of ['a', 'b', 'c']) {
      const r = await curlJson(`https://127.0.0.1:${port}/pki/enroll`, serverCert, { csr_pem: opensslCsr(ca.dir).csrPem, idempotency_key: k },
        ['-H', `authorization: Bearer ${token}`]);
      t.equal(r.status, 201);
    }
  });

  await t.test('the CSR body limit', async (t) => {
    const body = { csr_pem: 'A'.repeat(10_000), idempotency_key: 'x' };
    const r = await curlJson(`https://127.0.0.1:${port}/pki/enroll`, serverCert, body);
    t.equal(r.status, 413);
    t.match(r.json.error, 'exceeds the limit');
  });
});

t.test('IPv6 clients are counted by their prefix', async (t) => {
  const limiter = createRateLimiter({ enabled: true, ipv6PrefixLen: 64, trustedProxyCidrs: [], policies: {} });
  const caps = createConnectionCaps(10, 2);
  const a = limiter.addressKey('2001:db8:1:2::10');
  const b = limiter.addressKey('2001:db8:1:2:ffff::1');
  const c = limiter.addressKey('2001:db8:1:3::1');
  t.equal(a, b, 'one /64');
  t.ok(caps.admit(a));
  t.ok(caps.admit(b));
  t.notOk(caps.admit(a), 'the /64 holds its two slots');
  t.ok(caps.admit(c), 'another /64 has its own');
  caps.release(a);
  t.ok(caps.admit(b));
  t.equal(limiter.addressKey('::ffff:10.0.0.1'), '10.0.0.1', 'IPv4-mapped addresses are IPv4');
});

t.test('start fails naming an unreadable listener certificate or key', async (t) => {
  const ca = makeCaFiles(t);
  const { env } = await enrollmentEnv(ca);
  const { startService } = await import('../../../src/main.js');
  const { createTestDatabase } = await import('../../helpers/database.js');
  const { QUIET_LISTENERS, testLogger } = await import('../../helpers/service.js');
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const start = (extra: Record<string, string>) => startService({ ...QUIET_LISTENERS, ...env, ...extra, DATABASE_URL: db.url }, { log: testLogger() });
  await t.rejects(start({ SVC_PKI_ENROLLMENT_TLS_CERT_PATH: ca.file('missing.pem') }), /SVC_PKI_ENROLLMENT_TLS_CERT_PATH: cannot read .*missing\.pem \(ENOENT\)/);
  await t.rejects(start({ SVC_PKI_ENROLLMENT_TLS_KEY_PATH: ca.file('missing.key') }), /SVC_PKI_ENROLLMENT_TLS_KEY_PATH: cannot read/);
  await t.rejects(start({ SVC_PKI_ENROLLMENT_TLS_CERT_PATH: '' }), /SVC_PKI_ENROLLMENT_TLS_CERT_PATH is required when enrollment is enabled/);
});

t.test('shutdown drains requests in flight up to the drain timeout, then cuts them', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, { SVC_PKI_ENROLLMENT_SHUTDOWN_DRAIN_TIMEOUT_SECS: '1', SVC_PKI_ENROLLMENT_HTTP_REQUEST_TIMEOUT_SECS: '30' });
  const ts = await startAuthService(t, env);
  const port = ts.service.ports.enrollment!;
  const socket = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(serverCert), servername: 'localhost' });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  // A request whose body never completes: in flight when shutdown starts.
  socket.write('POST /pki/enroll HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"csr');
  await sleep(200);
  const at = Date.now();
  const gone = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - at)));
  await ts.service.stop();
  const stopMs = Date.now() - at;
  const closedMs = await gone;
  t.ok(closedMs >= 800, `the request in flight was given the drain time (${closedMs} ms)`);
  t.ok(stopMs < 6000, `then cut: stop took ${stopMs} ms`);
});
