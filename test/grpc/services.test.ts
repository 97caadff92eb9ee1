// The gRPC runtime services end to end, through a client loaded from the repository's proto: AuthService
// (Authenticate, AuthenticateCredential with passwords and shared keys, revoked keys, the shared lockout,
// answers from cache while the tables are locked), AliasService.ResolveAlias, AuthzService.Check, the
// callers' grants and tenant isolation, and CertificateService served on the same listener.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ADMIN_ID, accessTokenFor, adminToken, login, setPassword, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { seedWorld, type World } from '../authz/helpers/world.js';
import { grpcClient } from './helpers.js';

const world: World = {
  tenants: { acme: {}, globex: {}, icy: {} },
  entities: {
    sensor: { kind: 'device', tenant: 'acme' },
    spare: { kind: 'device', tenant: 'acme' },
    sleepy: { kind: 'device', tenant: 'acme' },
    gsensor: { kind: 'device', tenant: 'globex' },
    isensor: { kind: 'device', tenant: 'icy' },
    worker: { kind: 'human' },
    acmeAdapter: { kind: 'service', tenant: 'acme' },
    platformAdapter: { kind: 'service' },
    nobody: { kind: 'human' },
  },
  resources: { ch: { kind: 'channel', tenant: 'acme' }, gch: { kind: 'channel', tenant: 'globex' }, shared: { kind: 'channel' } },
  groups: {},
  objectMembers: [],
  principalMembers: [],
  blocks: {
    devPub: { scope: 'object', tenant: 'acme', object: 'ch', actions: ['publish'] },
    gdevPub: { scope: 'object', tenant: 'globex', object: 'gch', actions: ['publish'] },
    acmeCheck: { scope: 'tenant', tenant: 'acme', actions: ['authz.check'] },
    platformCheck: { scope: 'platform', actions: ['authz.check'] },
  },
  roles: {},
  assignments: [],
  policies: [
    { block: 'devPub', entity: 'sensor', tenant: 'acme' },
    { block: 'gdevPub', entity: 'gsensor', tenant: 'globex' },
    { block: 'acmeCheck', entity: 'acmeAdapter', tenant: 'acme' },
    { block: 'platformCheck', entity: 'platformAdapter' },
  ],
  credentials: {},
};

const ts = await startAuthService(t, { SVC_GRPC_ADDR: '127.0.0.1:0', SVC_LOGIN_FAILURE_LIMIT: '3', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '3' });
const sql = ts.service.sql;
const ids = await seedWorld(sql as never, world);
await sql`update tenants set alias = name where id in (${ids.acme!}, ${ids.globex!}, ${ids.icy!})`;
await sql`update resources set alias = 'telemetry' where id in (${ids.ch!}, ${ids.gch!})`;
await sql`update resources set alias = 'shared' where id = ${ids.shared!}`;
await sql`update entities set alias = 'sensor-1' where id = ${ids.sensor!}`;
const admin = await adminToken(ts);
const [acmeAdapter, platformAdapter, nobody] = await Promise.all([ids.acmeAdapter, ids.platformAdapter, ids.nobody].map((id) => tokenFor(ts, id as string)));

async function sharedKey(entity: string): Promise<{ credentialId: string; key: string }> {
  const res = await gql(ts.url(), 'mutation ($id: ID!) { createSharedKey(entityId: $id) { credentialId key } }', { id: ids[entity] }, admin);
  if (!res.body.data?.createSharedKey) throw new Error(JSON.stringify(res.body.errors));
  return res.body.data.createSharedKey;
}
const keys = { sensor: await sharedKey('sensor'), spare: await sharedKey('spare'), sleepy: await sharedKey('sleepy'), gsensor: await sharedKey('gsensor'), isensor: await sharedKey('isensor') };
// Made inactive and frozen once their keys exist (the management API refuses keys for them).
await sql`update entities set status = 'inactive' where id = ${ids.sleepy!}`;
await sql`update tenants set status = 'frozen' where id = ${ids.icy!}`;
const workerPassword = 'worker-password-0123';
await setPassword(ts, ids.worker as string, workerPassword);

const client = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`);
t.teardown(() => client.close());
const code = (name: keyof typeof grpc.status) => grpc.status[name];
const credential = (identifier: string, secret: string, extra: Record<string, string> = {}) => ({ identifier, secret, ...extra });

t.test('AuthService.Authenticate: a token in the request, no metadata', async (t) => {
  t.match(await client.call('AuthService', 'Authenticate', { token: admin }), { err: null, res: { entity_id: ADMIN_ID, tenant_id: '' } });
  t.match((await client.call('AuthService', 'Authenticate', { token: admin })).res.session_id, /^[0-9a-f-]{36}$/, 'a session token names its session');
  const access = await accessTokenFor(ts, acmeAdapter as string);
  t.same((await client.call('AuthService', 'Authenticate', { token: access.token })).res,
    { entity_id: ids.acmeAdapter, tenant_id: ids.acme, session_id: '' }, 'an access token: the entity\'s own tenant, no session');
  t.match(await client.call('AuthService', 'Authenticate', { token: '' }), { err: { code: code('UNAUTHENTICATED'), details: 'token is required' } });
  t.match(await client.call('AuthService', 'Authenticate', { token: 'not-a-token' }), { err: { code: code('UNAUTHENTICATED') } });
  const session = await login(ts, 'admin', 'test-admin-secret-0123456789');
  await gql(ts.url(), 'mutation { logout }', {}, session.token);
  t.match(await client.call('AuthService', 'Authenticate', { token: session.token }), { err: { code: code('UNAUTHENTICATED'), details: 'revoked token' } },
    'a logged-out session is refused');
});

t.test('AuthService.AuthenticateCredential: shared keys and passwords', async (t) => {
  const as = (token: string, req: Record<string, unknown>) => client.call('AuthService', 'AuthenticateCredential', req, { token });
  t.same((await as(platformAdapter as string, credential(ids.sensor as string, keys.sensor.key, { kind: 'shared_key' }))).res,
    { entity_id: ids.sensor, tenant_id: ids.acme, credential_id: keys.sensor.credentialId }, 'a device key by the entity UUID');
  t.same((await as(acmeAdapter as string, credential('sensor-1', keys.sensor.key, { kind: 'SHARED_KEY', tenant_alias: 'ACME' }))).res,
    { entity_id: ids.sensor, tenant_id: ids.acme, credential_id: keys.sensor.credentialId }, 'by alias in a tenant chosen by alias (any case)');
  t.same((await as(platformAdapter as string, credential('worker', workerPassword))).res?.entity_id, ids.worker, 'a password (the default kind) by name');
  t.match((await as(platformAdapter as string, credential(ids.worker as string, workerPassword, { kind: 'password' }))).res,
    { entity_id: ids.worker, tenant_id: '', credential_id: /^[0-9a-f-]{36}$/ });

  const refused = { err: { code: code('UNAUTHENTICATED'), details: 'invalid credentials' } };
  t.match(await as(platformAdapter as string, credential(ids.spare as string, 'wrong-key', { kind: 'shared_key' })), refused, 'a wrong key');
  t.match(await as(platformAdapter as string, credential(ids.gsensor as string, keys.sensor.key, { kind: 'shared_key' })), refused, 'another entity\'s key');
  t.match(await as(platformAdapter as string, credential('worker', 'wrong password')), refused, 'a wrong password');
  t.match(await as(platformAdapter as string, credential(ids.sleepy as string, keys.sleepy.key, { kind: 'shared_key' })), refused, 'an inactive device');
  t.match(await as(platformAdapter as string, credential(ids.isensor as string, keys.isensor.key, { kind: 'shared_key' })), refused, 'a device of a frozen tenant');
  t.match(await as(platformAdapter as string, credential(ids.isensor as string, keys.isensor.key, { kind: 'shared_key', tenant_alias: 'icy' })), refused,
    'in a frozen tenant');
  t.match(await as(platformAdapter as string, credential(ids.sensor as string, keys.sensor.key, { kind: 'shared_key', tenant_alias: 'nowhere' })), refused,
    'an unknown tenant, to a platform-wide caller');

  const bad = (details: string) => ({ err: { code: code('INVALID_ARGUMENT'), details } });
  t.match(await as(admin, credential('x', 'y', { kind: 'token' })), bad('unsupported credential kind: expected password or shared_key'));
  t.match(await as(admin, credential('', 'y')), bad('identifier is required'));
  t.match(await as(admin, credential('x', '')), bad('secret is required'));
  t.match(await as(admin, credential('x', 'y', { tenant_id: ids.acme as string, tenant_alias: 'acme' })), bad('give tenant_id or tenant_alias, not both'));
  t.match(await as(admin, credential('x', 'y', { tenant_id: 'acme' })), bad('tenant_id must be a UUID'));
});

t.test('a revoked key is refused at once, though it was cached', async (t) => {
  const req = credential(ids.spare as string, keys.spare.key, { kind: 'shared_key' });
  t.equal((await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter })).res?.entity_id, ids.spare);
  const res = await gql(ts.url(), 'mutation ($c: ID!, $e: ID) { revokeCredential(credentialId: $c, entityId: $e) }', { c: keys.spare.credentialId, e: ids.spare }, admin);
  t.equal(res.body.data?.revokeCredential, true);
  t.match(await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter }),
    { err: { code: code('UNAUTHENTICATED'), details: 'invalid credentials' } });
});

t.test('the common case runs no SQL: answered while every table it could read is locked', async (t) => {
  const req = credential(ids.sensor as string, keys.sensor.key, { kind: 'shared_key' });
  const inTenant = credential(ids.sensor as string, keys.sensor.key, { kind: 'shared_key', tenant_alias: 'acme' });
  t.equal((await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter })).res?.entity_id, ids.sensor, 'warm');
  t.equal((await client.call('AuthService', 'AuthenticateCredential', inTenant, { token: acmeAdapter })).res?.entity_id, ids.sensor, 'warm');
  const check = { subject_id: ids.sensor, action: 'publish', resource_id: ids.ch };
  t.equal((await client.call('AuthzService', 'Check', check, { token: acmeAdapter })).res?.allowed, true, 'warm');
  t.equal((await client.call('AuthzService', 'Check', check, { token: platformAdapter })).res?.allowed, true, 'warm, a platform-wide caller');
  await sql.begin(async (tx) => {
    await tx`lock table credentials, entities, tenants, sessions, auth_login_failures, permission_blocks, direct_policies, role_assignments,
      resources, tenant_memberships in access exclusive mode`;
    const during = await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter, deadlineMs: 3000 });
    t.same(during.res, { entity_id: ids.sensor, tenant_id: ids.acme, credential_id: keys.sensor.credentialId }, 'AuthenticateCredential');
    t.same((await client.call('AuthService', 'AuthenticateCredential', inTenant, { token: acmeAdapter, deadlineMs: 3000 })).res,
      { entity_id: ids.sensor, tenant_id: ids.acme, credential_id: keys.sensor.credentialId }, 'AuthenticateCredential in a tenant chosen by alias');
    t.match(await client.call('AuthzService', 'Check', check, { token: acmeAdapter, deadlineMs: 3000 }), { err: null, res: { allowed: true } }, 'Check');
    t.match(await client.call('AuthzService', 'Check', check, { token: platformAdapter, deadlineMs: 3000 }), { err: null, res: { allowed: true } },
      'Check by a platform-wide caller');
  });
});

t.test('a renamed tenant alias stops resolving on every instance (sql/0300 NOTIFY)', async (t) => {
  const req = credential(ids.gsensor as string, keys.gsensor.key, { kind: 'shared_key', tenant_alias: 'globex' });
  t.match(await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter }), { err: null, res: { tenant_id: ids.globex } }, 'cached');
  await sql`update tenants set alias = 'globex-renamed' where id = ${ids.globex!}`;
  await waitUntil(async () => (await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter })).err !== null, 10_000,
    'the old alias to be refused');
  t.match(await client.call('AuthService', 'AuthenticateCredential', { ...req, tenant_alias: 'globex-renamed' }, { token: platformAdapter }),
    { err: null, res: { tenant_id: ids.globex } }, 'the new alias resolves');
  await sql`update tenants set alias = 'globex' where id = ${ids.globex!}`;
  await waitUntil(async () => (await client.call('AuthService', 'AuthenticateCredential', req, { token: platformAdapter })).err === null, 10_000,
    'the alias back');
});

t.test('failed attempts count toward the same throttle as login', async (t) => {
  // Two failures over GraphQL login and one over gRPC land on one identity counter (the entity's id,
  // whatever spelling named it), each with its client's address: the adapter's peer address for gRPC,
  // counted with the identity but not as an address-wide total (an adapter relays a fleet).
  const name = ids.worker as string;
  await sql`delete from auth_login_failures`; // what earlier tests of this file counted
  for (let i = 0; i < 2; i++) await t.rejects(login(ts, name, `wrong-${i}`), /invalid credentials/);
  t.match(await client.call('AuthService', 'AuthenticateCredential', credential(name, 'wrong-2'), { token: platformAdapter }),
    { err: { code: code('UNAUTHENTICATED') } });
  const [row] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = ${`id:${ids.worker}`}`;
  t.equal(row?.failures, 3, 'one counter for both paths');
  const [pair] = await sql<{ failures: number }[]>`select failures from auth_login_failures where key = ${`pair:${ids.worker}
127.0.0.1`}`;
  t.equal(pair?.failures, 3, 'both from this address');
  // Past the identity limit (3 here) attempts from anywhere are held back (at most
  // SVC_LOGIN_FAILURE_MAX_DELAY_SECS), never refused; the pair past its limit (3) is refused.
  await sql`update auth_login_failures set failures = 10, last_failed_at = now() where key = ${`pair:${ids.worker}
127.0.0.1`}`;
  const held = await client.call('AuthService', 'AuthenticateCredential', credential(name, workerPassword), { token: platformAdapter });
  t.match(held, { err: { code: code('RESOURCE_EXHAUSTED'), details: 'too many failed login attempts' } }, 'even the right password, from that address');
  t.match(held.err?.metadata.get('retry-after')[0], /^\d+$/, 'with retry-after');
  await t.rejects(login(ts, name, workerPassword), /too many failed login attempts/, 'login from that address is refused too');
  await sql`delete from auth_login_failures where key = ${`pair:${ids.worker}
127.0.0.1`}`;
  t.match(await client.call('AuthService', 'AuthenticateCredential', credential(name, workerPassword), { token: platformAdapter }),
    { err: null, res: { entity_id: ids.worker } }, 'and answers once the pair is gone (the identity only holds back)');
});

t.test('AuthenticateCredential: grants and tenant isolation', async (t) => {
  const as = (token: string, req: Record<string, unknown>) => client.call('AuthService', 'AuthenticateCredential', req, { token });
  const denied = { err: { code: code('PERMISSION_DENIED'), details: 'forbidden' } };
  const sensorKey = (extra: Record<string, string> = {}) => credential(ids.sensor as string, keys.sensor.key, { kind: 'shared_key', ...extra });
  t.match(await as(acmeAdapter as string, sensorKey({ tenant_id: ids.acme as string })), { err: null, res: { entity_id: ids.sensor } }, 'its own tenant');
  t.match(await as(acmeAdapter as string, sensorKey()), denied, 'no tenant selected: platform reach needed');
  t.match(await as(nobody as string, sensorKey({ tenant_id: ids.acme as string })), denied, 'a caller without authz.check');
  t.match(await as(acmeAdapter as string, credential(ids.gsensor as string, keys.gsensor.key, { kind: 'shared_key', tenant_alias: 'globex' })), denied,
    'another tenant');
  t.match(await as(acmeAdapter as string, credential(ids.gsensor as string, keys.gsensor.key, { kind: 'shared_key', tenant_alias: 'acme' })),
    { err: { code: code('UNAUTHENTICATED'), details: 'invalid credentials' } }, 'another tenant\'s device through its own tenant');
  t.match(await as(acmeAdapter as string, sensorKey({ tenant_alias: 'nowhere' })), denied, 'an unknown tenant looks like another tenant');
  t.match(await client.call('AuthService', 'AuthenticateCredential', sensorKey()), { err: { code: code('UNAUTHENTICATED'), details: 'missing authorization metadata' } });
  t.match(await client.call('AuthService', 'AuthenticateCredential', sensorKey(), { authorization: `Basic ${admin}` }),
    { err: { code: code('UNAUTHENTICATED'), details: 'expected Bearer token' } });
  t.match(await client.call('AuthService', 'AuthenticateCredential', sensorKey(), { token: 'svc_nonsense' }), { err: { code: code('UNAUTHENTICATED') } });
});

t.test('AliasService.ResolveAlias', async (t) => {
  const resolve = (token: string | undefined, req: Record<string, unknown>) => client.call('AliasService', 'ResolveAlias', req, token ? { token } : {});
  const inAcme = { tenant_alias: 'acme', object_kind: 'resource', object_alias: 'telemetry' };
  t.same((await resolve(platformAdapter, inAcme)).res, { tenant_id: ids.acme, object_id: ids.ch });
  t.same((await resolve(platformAdapter, { tenant_alias: 'GLOBEX', object_kind: 'Resource', object_alias: 'TELEMETRY' })).res,
    { tenant_id: ids.globex, object_id: ids.gch }, 'any case; the same alias in another tenant is another object');
  t.same((await resolve(platformAdapter, { tenant_id: ids.acme, object_kind: 'entity', object_alias: 'sensor-1' })).res, { tenant_id: ids.acme, object_id: ids.sensor });
  t.same((await resolve(platformAdapter, { global: true, object_kind: 'resource', object_alias: 'shared' })).res, { tenant_id: '', object_id: ids.shared });
  t.match(await resolve(platformAdapter, { ...inAcme, object_alias: 'nothing' }), { err: { code: code('NOT_FOUND'), details: 'resource alias not found' } });
  t.match(await resolve(platformAdapter, { ...inAcme, object_kind: 'entity' }), { err: { code: code('NOT_FOUND') } }, 'kinds are separate namespaces');
  t.match(await resolve(platformAdapter, { ...inAcme, tenant_alias: 'nowhere' }), { err: { code: code('NOT_FOUND'), details: 'tenant not found' } });

  const bad = (details: string) => ({ err: { code: code('INVALID_ARGUMENT'), details } });
  t.match(await resolve(platformAdapter, { object_kind: 'resource', object_alias: 'x' }), bad('exactly one of tenant_id, tenant_alias, global must be set'));
  t.match(await resolve(platformAdapter, { ...inAcme, global: true }), bad('exactly one of tenant_id, tenant_alias, global must be set'));
  t.match(await resolve(platformAdapter, { ...inAcme, object_kind: 'group' }), bad("object_kind must be 'entity' or 'resource'"));
  t.match(await resolve(platformAdapter, { ...inAcme, object_alias: '' }), bad('object_alias is required'));
  t.match(await resolve(platformAdapter, { tenant_id: 'acme', object_kind: 'resource', object_alias: 'x' }), bad('tenant_id must be a UUID'));

  // Tenant isolation: acme's adapter maps acme's aliases only.
  const denied = { err: { code: code('PERMISSION_DENIED'), details: 'forbidden' } };
  t.same((await resolve(acmeAdapter, inAcme)).res, { tenant_id: ids.acme, object_id: ids.ch }, 'its own tenant');
  t.match(await resolve(acmeAdapter, { ...inAcme, tenant_alias: 'globex' }), denied, 'another tenant\'s alias');
  t.match(await resolve(acmeAdapter, { ...inAcme, tenant_id: ids.globex, tenant_alias: '' }), denied, 'another tenant by id');
  t.match(await resolve(acmeAdapter, { global: true, object_kind: 'resource', object_alias: 'shared' }), denied, 'the global namespace');
  t.match(await resolve(acmeAdapter, { ...inAcme, tenant_alias: 'nowhere' }), denied, 'an unknown tenant looks like another tenant');
  t.match(await resolve(nobody, inAcme), denied, 'a caller without authz.check');
  t.match(await resolve(undefined, inAcme), { err: { code: code('UNAUTHENTICATED'), details: 'missing authorization metadata' } });
});

t.test('AuthzService.Check: grants, tenant isolation, object_kind wins over resource_id', async (t) => {
  const check = (token: string | undefined, req: Record<string, unknown>) => client.call('AuthzService', 'Check', req, token ? { token } : {});
  t.match(await check(acmeAdapter, { subject_id: ids.sensor, action: 'publish', resource_id: ids.ch }), { err: null, res: { allowed: true } });
  t.match(await check(acmeAdapter, { subject_id: ids.sensor, action: 'publish', object_kind: 'resource', object_id: ids.gch }),
    { err: { code: code('PERMISSION_DENIED') } }, 'asking about another tenant\'s object');
  t.match(await check(acmeAdapter, { subject_id: ids.gsensor, action: 'publish', resource_id: ids.gch }),
    { err: { code: code('PERMISSION_DENIED') } }, 'asking about another tenant\'s subject and object');
  t.match(await check(platformAdapter, { subject_id: ids.gsensor, action: 'publish', resource_id: ids.gch }), { err: null, res: { allowed: true } });
  t.match(await check(acmeAdapter, { subject_id: ids.sensor, action: 'publish', resource_id: ids.gch, object_kind: 'resource', object_id: ids.ch }),
    { err: null, res: { allowed: true } }, 'object_kind/object_id win: resource_id (another tenant\'s) is ignored');
  t.match(await check(nobody, { subject_id: ids.sensor, action: 'publish', resource_id: ids.ch }), { err: { code: code('PERMISSION_DENIED') } });
  t.match(await check(undefined, { subject_id: ids.sensor, action: 'publish', resource_id: ids.ch }),
    { err: { code: code('UNAUTHENTICATED'), details: 'missing authorization metadata' } });
  t.match(await check(acmeAdapter, { subject_id: 'x', action: 'publish', resource_id: ids.ch }), { err: { code: code('INVALID_ARGUMENT'), details: 'subject_id must be a UUID' } });
});

// The methods themselves: test/grpc/certificates.test.ts.
t.test('CertificateService is served beside the others on the one listener', async (t) => {
  t.match(await client.call('CertificateService', 'ResolveCertificateV2', { fingerprint_sha256: 'ab' }, { token: admin }),
    { err: { code: code('INVALID_ARGUMENT'), details: /^fingerprint_sha256 must be 64 hex digits/ } });
  t.match(await client.call('CertificateService', 'RevokeEntityCertificates', { entity_id: 'x' }, { token: admin }),
    { err: { code: code('INVALID_ARGUMENT'), details: 'entity_id must be a UUID' } });
});
