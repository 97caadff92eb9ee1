// Issue 32 point 2: no anonymous caller can lock an account out. Every path that checks a password or key
// counts failures with the client's address (src/auth/login-throttle.ts, address-throttle.ts): failures
// from one address refuse only that (identity, address) pair, and the identity-wide and address-wide
// limits hold attempts back (here at most 1 s) instead of refusing them. Clients bind real loopback
// addresses (127.0.0.x): curl --interface, undici's Agent localAddress, and a TCP relay for grpc-js.
// Also point 6: a wrong EST Basic password is a 401 with WWW-Authenticate, and gRPC with two
// `authorization` values is UNAUTHENTICATED.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import postgres from 'postgres';
import t from 'tap';
import { Agent, fetch } from 'undici';
import { seedWorld } from '../authz/helpers/world.js';
import { grpcClient } from '../grpc/helpers.js';
import { ADMIN_SECRET, adminToken, startAuthService } from '../helpers/auth.js';
import { curl, enrollmentEnv, estCsrFile } from '../helpers/enrollment.js';
import { createEntity, createTenant, ok } from '../helpers/management.js';
import { makeCaFiles } from '../helpers/pki.js';
import { grant, insertDevice, SENML, world } from '../messaging/helpers.js';

const run = promisify(execFile);
const LIMITS = {
  SVC_LOGIN_FAILURE_LIMIT: '3', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '5', SVC_LOGIN_FAILURE_IP_LIMIT: '6', SVC_LOGIN_FAILURE_MAX_DELAY_SECS: '1',
};
const ca = makeCaFiles(t);
const { env, serverCert } = await enrollmentEnv(ca);
const ts = await startAuthService(t, { ...env, ...LIMITS, SVC_GRPC_ADDR: '127.0.0.1:0' });
const sql = ts.service.sql;
const admin = await adminToken(ts);
const ADMIN = '00000000-0000-0000-0000-000000000001';

const agents = new Map<string, Agent>();
t.teardown(() => Promise.all([...agents.values()].map((a) => a.close())));
/** An HTTP client whose connections leave from `localAddress`. */
function agentAt(localAddress: string): Agent {
  let agent = agents.get(localAddress);
  if (!agent) agents.set(localAddress, (agent = new Agent({ localAddress })));
  return agent;
}

async function loginFrom(localAddress: string, identifier: string, secret: string, via: 'graphql' | 'rest' = 'graphql') {
  const started = Date.now();
  const dispatcher = agentAt(localAddress);
  const headers = { 'content-type': 'application/json' };
  if (via === 'rest') {
    const res = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers, body: JSON.stringify({ identifier, secret }), dispatcher });
    const body = (await res.json()) as { token?: string; error?: string };
    return { ok: Boolean(body.token), status: res.status, message: body.error, ms: Date.now() - started };
  }
  const res = await fetch(`${ts.url()}/graphql`, {
    method: 'POST', headers, dispatcher,
    body: JSON.stringify({ query: 'mutation ($i: LoginInput!) { login(input: $i) { token } }', variables: { i: { identifier, secret } } }),
  });
  const body = (await res.json()) as { data?: { login: { token: string } }; errors?: { message: string; extensions: { code: string } }[] };
  return { ok: Boolean(body.data?.login?.token), message: body.errors?.[0]?.message, code: body.errors?.[0]?.extensions.code, ms: Date.now() - started };
}

const clearCounters = () => sql`delete from auth_login_failures`;

t.test('EST Basic: guesses from one address neither lock the identity out elsewhere; 401 names the scheme', async (t) => {
  await clearCounters();
  const est = `https://127.0.0.1:${ts.service.ports.enrollment}/.well-known/est/simpleenroll`;
  const csr = await estCsrFile(ca.dir);
  const enroll = (from: string, user: string, secret: string) =>
    curl(est, serverCert, ['--interface', from, '-X', 'POST', '-H', 'content-type: application/pkcs10', '--data-binary', `@${csr.file}`, '-u', `${user}:${secret}`]);

  const answers = [];
  for (let i = 0; i < 22; i++) answers.push(await enroll('127.0.0.2', 'admin', `wrong-${i}`));
  t.equal(answers[0]!.status, 401, 'a wrong password: 401');
  t.equal(answers[0]!.headers['www-authenticate'], 'Basic realm="est"', 'with the challenge');
  t.same(answers.slice(0, 3).map((a) => a.status), [401, 401, 401], 'three free tries from that address');
  t.equal(answers[3]!.status, 429, 'then that address is refused');
  t.ok(Number(answers[3]!.headers['retry-after']) >= 1, 'with Retry-After');
  // Each delay doubles: over the seconds this loop takes a guess or two more gets through, no more.
  const tried = answers.filter((a) => a.status === 401).length;
  t.ok(tried <= 6 && answers.every((a) => a.status === 401 || a.status === 429), `${tried} of ${answers.length} guesses were checked`);
  const [pair] = await sql<{ key: string }[]>`select key from auth_login_failures where key like 'pair:%'`;
  t.equal(pair?.key, `pair:${ADMIN}\n127.0.0.2`, "counted on the admin's identity with the client's address");
  // Refused guesses are not counted: one address cannot push the identity past its limit (5) for everyone.
  const [identity] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = ${`id:${ADMIN}`}`;
  t.equal(identity?.failures, tried, 'the identity counts only the guesses that address was let to try');

  // As if the last guess had just been made (the loop takes seconds): every counter at its strictest.
  await sql`update auth_login_failures set last_failed_at = now()`;
  const login = await loginFrom('127.0.0.3', 'admin', ADMIN_SECRET);
  t.ok(login.ok, `the administrator's right password from 127.0.0.3 is let in (${login.message ?? 'ok'})`);

  // The same for a device's own key over EST.
  const tenant = await createTenant(ts, admin, 'est-lockout');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'est-lockout-device', tenantId: tenant });
  const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  for (let i = 0; i < 10; i++) await enroll('127.0.0.2', device, `wrong-key-${i}`);
  await sql`update auth_login_failures set last_failed_at = now()`;
  const refused = await enroll('127.0.0.2', device, key);
  t.equal(refused.status, 429, 'at the guessing address the pair is held off, even for the right key');
  const enrolled = await enroll('127.0.0.3', device, key);
  t.equal(enrolled.status, 200, `the device enrolls from another address (${enrolled.body.slice(0, 120)})`);
});

/** A local TCP relay whose connections to `port` leave from `localAddress` (grpc-js cannot bind one). */
async function relayFrom(localAddress: string, port: number): Promise<number> {
  const server = net.createServer((inbound) => {
    const outbound = net.connect({ host: '127.0.0.1', port, localAddress });
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as net.AddressInfo).port;
}

t.test('gRPC AuthenticateCredential: another tenant\'s adapter cannot lock a device out', async (t) => {
  await clearCounters();
  const ids = await seedWorld(sql as never, {
    tenants: { acme: {}, globex: {} },
    entities: { sensor: { kind: 'device', tenant: 'acme' }, acmeAdapter: { kind: 'service', tenant: 'acme' }, globexAdapter: { kind: 'service', tenant: 'globex' } },
    resources: {}, groups: {}, objectMembers: [], principalMembers: [], roles: {}, assignments: [], credentials: {},
    blocks: {
      acmeCheck: { scope: 'tenant', tenant: 'acme', actions: ['authz.check'] },
      globexCheck: { scope: 'tenant', tenant: 'globex', actions: ['authz.check'] },
    },
    policies: [{ block: 'acmeCheck', entity: 'acmeAdapter', tenant: 'acme' }, { block: 'globexCheck', entity: 'globexAdapter', tenant: 'globex' }],
  });
  const token = async (id: string) => (await ok(ts, admin, 'mutation ($id: ID!) { createSharedKey(entityId: $id, input: {}) { key } }', { id })).createSharedKey.key as string;
  const key = await token(ids.sensor as string);
  const adapterToken = async (id: string) => {
    const secret = `pw-${id.slice(0, 8)}-0123456789`;
    await ok(ts, admin, 'mutation ($id: ID!, $pw: String!) { createPassword(entityId: $id, password: $pw) }', { id, pw: secret });
    const res = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ identifier: id, secret }) });
    return ((await res.json()) as { token: string }).token;
  };
  const [acme, globex] = await Promise.all([adapterToken(ids.acmeAdapter as string), adapterToken(ids.globexAdapter as string)]);
  await clearCounters();
  const grpcPort = ts.service.ports.grpc as number;
  const attacker = grpcClient(`127.0.0.1:${await relayFrom('127.0.0.4', grpcPort)}`);
  const victim = grpcClient(`127.0.0.1:${await relayFrom('127.0.0.5', grpcPort)}`);
  t.teardown(() => {
    attacker.close();
    victim.close();
  });
  const codes: number[] = [];
  for (let i = 0; i < 22; i++) {
    const reply = await attacker.call('AuthService', 'AuthenticateCredential',
      { identifier: ids.sensor, secret: `wrong-${i}`, kind: 'shared_key', tenant_id: ids.globex }, { token: globex });
    codes.push(reply.err?.code ?? 0);
  }
  t.same(codes.slice(0, 4), [grpc.status.UNAUTHENTICATED, grpc.status.UNAUTHENTICATED, grpc.status.UNAUTHENTICATED, grpc.status.RESOURCE_EXHAUSTED],
    'three tries, then that adapter address is refused for that identity');
  const tried = codes.filter((c) => c === grpc.status.UNAUTHENTICATED).length;
  t.ok(tried <= 6 && codes.every((c) => c === grpc.status.UNAUTHENTICATED || c === grpc.status.RESOURCE_EXHAUSTED), `${tried} of ${codes.length} guesses were checked`);
  const [pair] = await sql<{ key: string }[]>`select key from auth_login_failures where key like 'pair:%'`;
  t.equal(pair?.key, `pair:${ids.sensor}\n127.0.0.4`, "the adapter's peer address is counted with the identity");
  const [identity] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = ${`id:${ids.sensor}`}`;
  t.equal(identity?.failures, tried, 'the identity counts only the guesses that address was let to try');
  const [address] = await sql<{ n: number }[]>`select count(*)::int as n from auth_login_failures where key like 'ip:%'`;
  t.equal(address?.n, 0, 'an adapter relays a fleet: no address-wide total');
  await sql`update auth_login_failures set last_failed_at = now()`;
  const answer = await victim.call('AuthService', 'AuthenticateCredential',
    { identifier: ids.sensor, secret: key, kind: 'shared_key', tenant_id: ids.acme }, { token: acme });
  t.match(answer, { err: null, res: { entity_id: ids.sensor, tenant_id: ids.acme } }, "the device's own tenant, from another address, is answered");
});

t.test('gRPC: two authorization values are UNAUTHENTICATED', async (t) => {
  // grpc-js clients refuse to send this themselves: a raw HTTP/2 client (curl) sends both headers.
  const message = Buffer.concat([Buffer.from([0x0a, 5]), Buffer.from('admin'), Buffer.from([0x12, ADMIN_SECRET.length]), Buffer.from(ADMIN_SECRET)]);
  const frame = path.join(ca.dir, 'grpc-frame');
  writeFileSync(frame, Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]));
  const call = async (authorizations: string[]) => {
    const { stdout } = await run('curl', ['-sS', '-D', '-', '-o', '/dev/null', '--http2-prior-knowledge', ...authorizations.flatMap((a) => ['-H', `authorization: ${a}`]),
      '-H', 'content-type: application/grpc', '-H', 'te: trailers', '--data-binary', `@${frame}`,
      `http://127.0.0.1:${ts.service.ports.grpc}/atom.v1.AuthService/AuthenticateCredential`]);
    return { status: /grpc-status: (\d+)/.exec(stdout)?.[1], message: decodeURIComponent(/grpc-message: ([^\r\n]*)/.exec(stdout)?.[1] ?? '') };
  };
  t.match(await call([`Bearer ${admin}`]), { status: '0' }, 'one value: answered');
  t.same(await call([`Bearer ${admin}`, `Bearer ${admin}`]), { status: String(grpc.status.UNAUTHENTICATED), message: 'authorization metadata must have exactly one value' });
  t.same(await call(['Bearer nonsense', `Bearer ${admin}`]), { status: String(grpc.status.UNAUTHENTICATED), message: 'authorization metadata must have exactly one value' },
    'whichever comes first');
});

t.test('login: failures from many addresses hold the identity back, never refuse it', async (t) => {
  await clearCounters();
  for (let i = 0; i < 10; i++) t.equal((await loginFrom(`127.0.0.${10 + i}`, 'admin', `wrong-${i}`)).message, 'invalid credentials');
  const [identity] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = ${`id:${ADMIN}`}`;
  t.equal(identity?.failures, 10, 'past the identity limit (5)');
  const graphql = await loginFrom('127.0.0.30', 'admin', ADMIN_SECRET);
  t.ok(graphql.ok, `GraphQL: the right password from a fresh address is let in (${graphql.message ?? 'ok'})`);
  t.ok(graphql.ms >= 900 && graphql.ms < 5000, `after a hold of at most SVC_LOGIN_FAILURE_MAX_DELAY_SECS: ${graphql.ms} ms`);
  // The success cleared the identity's counter: past its limit again.
  for (let i = 0; i < 8; i++) await loginFrom(`127.0.0.${10 + i}`, 'admin', `wrong-again-${i}`, 'rest');
  const rest = await loginFrom('127.0.0.31', 'admin', ADMIN_SECRET, 'rest');
  t.match(rest, { ok: true, status: 200 }, 'REST too');
  t.ok(rest.ms >= 900, `after its hold: ${rest.ms} ms`);
});

t.test('login: past the address ceiling the right password at that address is held back, not refused', async (t) => {
  await clearCounters();
  for (let i = 0; i < 8; i++) await loginFrom('127.0.0.40', `user${i}@example.com`, 'a wrong password');
  const [address] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = 'ip:127.0.0.40'`;
  t.equal(address?.failures, 8, 'past the ceiling (6)');
  const held = await loginFrom('127.0.0.40', 'admin', ADMIN_SECRET);
  t.ok(held.ok, `the administrator behind that address gets in (${held.message ?? 'ok'})`);
  t.ok(held.ms >= 900, `after a hold: ${held.ms} ms`);
  const elsewhere = await loginFrom('127.0.0.41', 'admin', ADMIN_SECRET);
  t.ok(elsewhere.ok && elsewhere.ms < 900, `another address is not held back: ${elsewhere.ms} ms`);
});

t.test('device keys over HTTP: past the address ceiling lookups are held back, other addresses are not', async (t) => {
  const w = await world(ts);
  const url = `${ts.url('messaging')}/http/m/${w.ws}/c/${w.channel}`;
  const publish = async (from: string, key: string) => {
    const started = Date.now();
    const res = await fetch(url, {
      method: 'POST', dispatcher: agentAt(from), headers: { authorization: `Client ${key}`, 'content-type': SENML }, body: JSON.stringify([{ n: 't', v: 1 }]),
    });
    await res.arrayBuffer();
    return { status: res.status, ms: Date.now() - started };
  };
  for (let i = 0; i < 8; i++) t.equal((await publish('127.0.0.50', `not-a-key-${i}-0123456789abcdef`)).status, 401);
  const held = await publish('127.0.0.50', 'not-a-key-either-0123456789abcdef');
  t.equal(held.status, 401);
  t.ok(held.ms >= 900, `a further miss from that address is held back: ${held.ms} ms`);
  const other = await publish('127.0.0.51', w.publisher.key);
  t.equal(other.status, 202, 'the right key from another address is answered');
  t.ok(other.ms < 900, `at once: ${other.ms} ms`);
  const cached = await publish('127.0.0.50', w.publisher.key);
  t.ok(cached.status === 202 && cached.ms < 900, `a key verified before answers from the cache even there: ${cached.ms} ms`);
  // The hot path: a cached key never even reads the client's address.
  let reads = 0;
  const peer = { get ip() { reads++; return '127.0.0.52'; } };
  t.ok(await ts.service.auth.authenticateDeviceKey(w.publisher.key, peer), 'cached key');
  t.equal(reads, 0, 'no address read, no throttle consulted on a cache hit');
  t.equal(await ts.service.auth.authenticateDeviceKey('not-a-key-0123456789abcdef-xyz', peer), null);
  t.ok(reads > 0, 'a miss is throttled by the address');

  const second = await insertDevice(ts, w.ws);
  await grant(ts, w.ws, second.id, w.channel, ['publish']);
  const fresh = await publish('127.0.0.50', second.key);
  t.equal(fresh.status, 202, 'a right key not cached yet is accepted at the held address');
  t.ok(fresh.ms >= 900, `after the hold: ${fresh.ms} ms`);
});

t.test('enrollment bearer tokens: past the address ceiling unusable tokens are held back, cached ones are not', async (t) => {
  const enroll = `https://127.0.0.1:${ts.service.ports.enrollment}/pki/enroll`;
  const post = async (from: string, token: string) => {
    const started = Date.now();
    const r = await curl(enroll, serverCert, ['--interface', from, '-X', 'POST', '-H', 'content-type: application/json', '-H', `authorization: Bearer ${token}`, '--data-binary', '{}']);
    return { status: r.status, ms: Date.now() - started };
  };
  for (let i = 0; i < 8; i++) t.equal((await post('127.0.0.60', `svc_${'0'.repeat(32)}_${String(i).padStart(64, '0')}`)).status, 401);
  const held = await post('127.0.0.60', `svc_${'0'.repeat(32)}_${'9'.repeat(64)}`);
  t.equal(held.status, 401);
  t.ok(held.ms >= 900, `a further unusable token from that address is held back: ${held.ms} ms`);
  // The administrator's session is verified (and cached) already: it reaches the body check at once.
  const known = await post('127.0.0.60', admin);
  t.equal(known.status, 400, 'a known token is authenticated (then the empty body is refused)');
  t.ok(known.ms < 900, `without a hold: ${known.ms} ms`);
});

t.test('EST Basic: an attempt the database cut before its verdict is not counted as a guess', async (t) => {
  await clearCounters();
  const est = `https://127.0.0.1:${ts.service.ports.enrollment}/.well-known/est/simpleenroll`;
  const csr = await estCsrFile(ca.dir);
  const enroll = (secret: string) =>
    curl(est, serverCert, ['--interface', '127.0.0.70', '-X', 'POST', '-H', 'content-type: application/pkcs10', '--data-binary', `@${csr.file}`, '-u', `admin:${secret}`]);
  const holder = postgres(ts.db.url, { max: 2, onnotice: () => undefined });
  t.teardown(() => holder.end({ timeout: 1 }));
  const failures = async () => (await holder<{ failures: number }[]>`select failures from auth_login_failures`).reduce((n, r) => n + r.failures, 0);
  let answer: ReturnType<typeof enroll> | undefined;
  // The password lookup waits on a lock the test holds, after the attempt was admitted and counted; its
  // backend is terminated while it waits.
  await holder.begin(async (tx) => {
    await tx`lock table credentials in access exclusive mode`;
    answer = enroll('a wrong password');
    let waiting: { pid: number }[] = [];
    for (let i = 0; i < 200 && waiting.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      waiting = await holder<{ pid: number }[]>`
        select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike '%credentials%'`;
    }
    t.equal(waiting.length, 1, 'the lookup waits on the lock');
    t.equal(await failures(), 3, 'the attempt was counted as it was admitted');
    await holder`select pg_terminate_backend(${waiting[0]!.pid})`;
  });
  const cut = await answer!;
  t.equal(cut.status, 503, `the client is told to retry (${cut.body.slice(0, 80)})`);
  t.equal(await failures(), 0, 'and the attempt is not counted');
  t.equal((await enroll('a wrong password')).status, 401, 'the same guess with the database whole is checked');
  t.equal(await failures(), 3, 'and counted');
});
