// The gRPC listener's limits on a live service: client deadlines (an expired one, one passing while the
// server waits on a lock: the client is answered at its deadline and the server drops the rest of the
// work, counting no failed attempt), the message size limit, undecodable message bytes (INVALID_ARGUMENT),
// the HTTP/2 stream cap and keepalive pings.
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { adminToken, insertEntity, setPassword, startAuthService } from '../helpers/auth.js';
import { waitUntil } from '../helpers/wait.js';
import { grpcClient } from './helpers.js';

const ts = await startAuthService(t, {
  SVC_GRPC_ADDR: '127.0.0.1:0', SVC_GRPC_MAX_MESSAGE_BYTES: '4096', SVC_GRPC_MAX_CONCURRENT_STREAMS: '7',
  SVC_GRPC_KEEPALIVE_TIME_MS: '1000', SVC_GRPC_KEEPALIVE_TIMEOUT_MS: '5000',
});
const port = ts.service.ports.grpc as number;
const admin = await adminToken(ts);
const client = grpcClient(`127.0.0.1:${port}`);
t.teardown(() => client.close());
const ADMIN = '00000000-0000-0000-0000-000000000001';
const platformCheck = (context: Record<string, string> = {}) => ({ subject_id: ADMIN, action: 'manage', object_kind: 'platform', context });

t.test('deadlines', async (t) => {
  t.match(await client.call('AuthzService', 'Check', platformCheck(), { token: admin, deadlineMs: -1 }),
    { err: { code: grpc.status.DEADLINE_EXCEEDED } }, 'a deadline already past');

  // The lockout counters are the first thing a password check reads: with their table locked, the call
  // waits there until its deadline passes.
  const worker = await insertEntity(ts, { name: 'deadline-worker' });
  await setPassword(ts, worker, 'deadline-password-0123');
  const abandonedBefore = ts.service.grpc!.stats.abandoned;
  const sql = ts.service.sql;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const locked = sql.begin(async (tx) => {
    await tx`lock table auth_login_failures in access exclusive mode`;
    await released;
  });
  t.teardown(() => release());
  await waitUntil(async () => (await sql`select 1 from pg_locks where relation = 'auth_login_failures'::regclass and mode = 'AccessExclusiveLock' and granted`).length > 0,
    10_000, 'the lock');
  const started = Date.now();
  const reply = await client.call('AuthService', 'AuthenticateCredential', { identifier: worker, secret: 'wrong' }, { token: admin, deadlineMs: 400 });
  t.match(reply, { err: { code: grpc.status.DEADLINE_EXCEEDED } }, 'answered DEADLINE_EXCEEDED while the server still waits');
  t.ok(Date.now() - started < 5000, 'at its deadline, not when the lock goes');
  release();
  await locked;
  await waitUntil(() => ts.service.grpc!.stats.abandoned > abandonedBefore, 10_000, 'the server to drop the call');
  const rows = await sql`select failures from auth_login_failures where key = ${`id:password:${worker}`}`;
  t.same(rows.length, 0, 'the abandoned attempt was never checked, so it counted no failure');
  t.match(await client.call('AuthService', 'AuthenticateCredential', { identifier: worker, secret: 'deadline-password-0123' }, { token: admin }),
    { err: null, res: { entity_id: worker } }, 'the same call with time to spare answers');
});

t.test('messages over SVC_GRPC_MAX_MESSAGE_BYTES are refused', async (t) => {
  t.match(await client.call('AuthzService', 'Check', platformCheck({ note: 'x'.repeat(3000) }), { token: admin }),
    { err: null, res: { allowed: true } }, 'under the limit');
  t.match(await client.call('AuthzService', 'Check', platformCheck({ note: 'x'.repeat(5000) }), { token: admin }),
    { err: { code: grpc.status.RESOURCE_EXHAUSTED } }, 'over it');
  t.match(await client.call('AuthService', 'Authenticate', { token: 'x'.repeat(10_000) }), { err: { code: grpc.status.RESOURCE_EXHAUSTED } },
    'on a method without metadata too');
});

t.test('bytes that are no message of the method are INVALID_ARGUMENT, not INTERNAL', async (t) => {
  const raw = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  t.teardown(() => raw.close());
  const send = (path: string, bytes: Buffer) => new Promise<grpc.ServiceError | null>((resolve) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${admin}`);
    raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, bytes, md, (err) => resolve(err));
  });
  // Field 1 (a string of 6 bytes), then a fixed32 field cut short: protobufjs cannot decode it (found by the fuzz suite).
  const truncated = Buffer.from('0a06324d676a5d205d205d', 'hex');
  for (const path of ['/atom.v1.AuthzService/Check', '/atom.v1.AuthService/Authenticate', '/atom.v1.CertificateService/RevokeEntityCertificates']) {
    const err = await send(path, truncated);
    t.equal(err?.code, grpc.status.INVALID_ARGUMENT, `${path}: ${err?.details}`);
    t.match(err?.details, /request message is not a valid/);
  }
  t.match(await client.call('AuthzService', 'Check', platformCheck(), { token: admin }), { err: null, res: { allowed: true } }, 'a whole message still answers');
});

t.test('HTTP/2: the stream cap is announced, keepalive pings are sent', async (t) => {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.close());
  const settings = await new Promise<http2.Settings>((resolve) => session.once('remoteSettings', resolve));
  t.equal(settings.maxConcurrentStreams, 7, 'SVC_GRPC_MAX_CONCURRENT_STREAMS');
  // An open call keeps the connection in use; the server pings it after SVC_GRPC_KEEPALIVE_TIME_MS.
  let pings = 0;
  session.on('ping', () => pings++);
  await waitUntil(() => pings > 0, 10_000, 'a keepalive ping from the server');
  t.ok(pings > 0);
});
