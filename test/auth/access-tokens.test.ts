import t from 'tap';
import { ADMIN_ID, accessTokenFor, adminToken, insertEntity, startAuthService, tokenFor } from '../helpers/auth.js';
import postgres from 'postgres';
import { gql } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { touchCredentials } from '../../src/auth/credential-queries.js';

const CREATE = `mutation ($input: CreateAccessTokenInput!) { createAccessToken(input: $input) { credentialId token name description expiresAt } }`;
const LIST = `query ($s: ID, $status: String) { accessTokens(subjectId: $s, status: $status) { total items {
  credentialId name identifier status scoped expiresAt lastUsedAt createdAt
  permissions { actions scopeMode tenantId objectKind objectType objectId conditions } } } }`;
const CREDS = `query ($id: ID!) { credentials(entityId: $id) { total items { id entityId kind identifier status scoped expiresAt createdAt } } }`;
const REPLACE = `mutation ($id: ID!, $p: [AccessTokenPermissionInput!]!) { replaceAccessTokenPermissions(credentialId: $id, permissions: $p) }`;
const REVOKE = `mutation ($id: ID!) { revokeAccessToken(credentialId: $id) }`;
const TOKEN_FORMAT = /^svc_[0-9a-f]{32}_[0-9a-f]{64}$/;

t.test('unscoped tokens: exact format, shown once, act as the owner, revocation refused on the next request', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const res = await gql(ts.url(), CREATE, { input: { name: 'ci', description: 'pipeline', scoped: false, permissions: [] } }, admin);
  const created = res.body.data!.createAccessToken;
  t.match(created.token, TOKEN_FORMAT);
  t.equal(created.token.slice(4, 36), created.credentialId.replace(/-/g, ''), 'the credential id is embedded');
  const secret = created.token.slice(37);

  const listed = await gql(ts.url(), LIST, {}, created.token);
  t.equal(listed.body.data?.accessTokens.total, 1, 'the token authenticates as its owner');
  t.match(listed.body.data?.accessTokens.items[0], { credentialId: created.credentialId, name: 'ci', status: 'active', scoped: false, permissions: [] });
  const creds = await gql(ts.url(), CREDS, { id: ADMIN_ID }, admin);
  for (const body of [listed.body, creds.body]) {
    t.notMatch(JSON.stringify(body), secret, 'the secret is never returned again');
    t.notMatch(JSON.stringify(body), /scrypt|secret_hash|secretHash/, 'no hashes either');
  }
  t.same(creds.body.data?.credentials.items.map((c: { kind: string }) => c.kind).sort(), ['access_token', 'password']);
  const [row] = await ts.service.sql<{ secret_hash: string }[]>`select secret_hash from credentials where id = ${created.credentialId}`;
  t.not(row!.secret_hash, secret, 'stored hashed');

  t.equal((await gql(ts.url(), REVOKE, { id: created.credentialId }, admin)).body.data?.revokeAccessToken, true);
  const after = await gql(ts.url(), LIST, {}, created.token);
  t.equal(after.body.errors?.[0].extensions.code, 'UNAUTHENTICATED');
  t.equal(after.body.errors?.[0].extensions.details.reason, 'revoked_token');
  const wrong = await gql(ts.url(), LIST, {}, created.token.slice(0, -1) + (created.token.endsWith('0') ? '1' : '0'));
  t.equal(wrong.body.errors?.[0].extensions.details.reason, 'invalid_token', 'a wrong secret for a real id');
  t.equal((await gql(ts.url(), LIST, { status: 'revoked' }, admin)).body.data?.accessTokens.total, 1);

  const expiring = await accessTokenFor(ts, admin);
  t.ok((await gql(ts.url(), LIST, {}, expiring.token)).body.data, 'works (and is cached)');
  await ts.service.sql`update credentials set expires_at = now() - interval '1 second' where id = ${expiring.credentialId}`;
  await waitUntil(async () => (await gql(ts.url(), LIST, {}, expiring.token)).body.errors?.[0].extensions.details.reason === 'expired_token');
  t.pass('an expired token is refused');
});

t.test('validation messages of createAccessToken and replaceAccessTokenPermissions', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const perm = { actions: ['read'], scopeMode: 'platform' };
  const cases: [string, Record<string, unknown>, string | RegExp][] = [
    ['blank name', { name: ' ', permissions: [perm] }, 'name is required'],
    ['scoped without permissions', { name: 'x', permissions: [] }, 'a scoped access token needs at least one permission'],
    ['unscoped with permissions', { name: 'x', scoped: false, permissions: [perm] }, 'an unscoped access token takes an empty permissions list'],
    ['unknown action', { name: 'x', permissions: [{ actions: ['fly'], scopeMode: 'platform' }] }, 'unknown action: fly'],
    ['no actions', { name: 'x', permissions: [{ actions: [], scopeMode: 'platform' }] }, /each permission needs at least one action/],
    ['bad mode', { name: 'x', permissions: [{ actions: ['read'], scopeMode: 'group' }] }, /unsupported scopeMode 'group'/],
    ['tenant on platform', { name: 'x', permissions: [{ ...perm, tenantId: ADMIN_ID }] }, /tenantId is not allowed with scopeMode platform/],
    ['bad type', { name: 'x', permissions: [{ actions: ['read'], scopeMode: 'object_type', objectKind: 'entity', objectType: 'device' }] }, /objectType must be <objectKind>:<sub-kind>/],
    ['past expiry', { name: 'x', permissions: [perm], expiresAt: '2001-01-01T00:00:00Z' }, 'expiresAt must be in the future'],
    ['too many', { name: 'x', permissions: Array(101).fill(perm) }, 'at most 100 permissions are allowed'],
  ];
  for (const [why, input, message] of cases) {
    const res = await gql(ts.url(), CREATE, { input }, admin);
    t.match(res.body.errors?.[0], { message, extensions: { code: 'BAD_REQUEST' } }, why);
  }
  const unscoped = await accessTokenFor(ts, admin);
  const r = await gql(ts.url(), REPLACE, { id: unscoped.credentialId, p: [perm] }, admin);
  t.equal(r.body.errors?.[0].message, 'cannot set permissions on an unscoped access token');
  const scoped = await accessTokenFor(ts, admin, [perm]);
  t.equal((await gql(ts.url(), REPLACE, { id: scoped.credentialId, p: [{ actions: ['read', 'write'], scopeMode: 'object_kind', objectKind: 'entity' }] }, admin))
    .body.data?.replaceAccessTokenPermissions, true);
  const listed = await gql(ts.url(), LIST, {}, admin);
  const item = listed.body.data?.accessTokens.items.find((i: { credentialId: string }) => i.credentialId === scoped.credentialId);
  t.same(item.permissions, [{ actions: ['read', 'write'], scopeMode: 'object_kind', tenantId: null, objectKind: 'entity', objectType: null, objectId: null, conditions: {} }]);
});

t.test('a scoped token tries each forbidden operation', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const device = await insertEntity(ts, { name: 'probe', kind: 'device' });
  const peer = await accessTokenFor(ts, admin);
  const scoped = await accessTokenFor(ts, admin, [{ actions: ['read', 'manage'], scopeMode: 'object_kind', objectKind: 'credential' }]);
  const forbiddenOps: [string, string, Record<string, unknown>][] = [
    ['createPassword', `mutation ($id: ID!) { createPassword(entityId: $id, password: "a-long-enough-password") }`, { id: ADMIN_ID }],
    ['createPassword for a device', `mutation ($id: ID!) { createPassword(entityId: $id, password: "a-long-enough-password") }`, { id: device }],
    ['mint an unscoped token', CREATE, { input: { name: 'wider', scoped: false, permissions: [] } }],
    ['mint a broader token', CREATE, { input: { name: 'wider', permissions: [{ actions: ['read'], scopeMode: 'platform' }] } }],
    ['mint a token for another subject', CREATE, { input: { name: 'other', subjectId: device, permissions: [{ actions: ['read'], scopeMode: 'object_kind', objectKind: 'credential' }] } }],
    ['replace own permissions', REPLACE, { id: scoped.credentialId, p: [{ actions: ['read'], scopeMode: 'platform' }] }],
    ['replace a peer token', REPLACE, { id: peer.credentialId, p: [{ actions: ['read'], scopeMode: 'platform' }] }],
    ['revoke a peer token', REVOKE, { id: peer.credentialId }],
    ['create a shared key', `mutation ($id: ID!) { createSharedKey(entityId: $id) { key } }`, { id: device }],
    ['revoke a credential', `mutation ($id: ID!) { revokeCredential(credentialId: $id) }`, { id: peer.credentialId }],
    ['list credentials (ignores ceilings: fails closed)', CREDS, { id: ADMIN_ID }],
    ['list access tokens (fails closed)', LIST, {}],
    ['change own password', `mutation { changeOwnPassword(currentPassword: "x", newPassword: "a-long-enough-password") }`, {}],
    ['rotate signing keys', `mutation { rotateSigningKeys }`, {}],
  ];
  for (const [why, query, variables] of forbiddenOps) {
    const res = await gql(ts.url(), query, variables, scoped.token);
    t.match(res.body.errors?.[0], { message: 'forbidden', extensions: { code: 'FORBIDDEN' } }, why);
  }
  const refresh = await gql(ts.url(), `mutation { refreshSession { token } }`, {}, scoped.token);
  t.equal(refresh.body.errors?.[0].message, 'session refresh requires a session token');
  t.equal((await gql(ts.url(), REVOKE, { id: peer.credentialId }, admin)).body.data?.revokeAccessToken, true, 'the peer was untouched until now');

  const narrower = await gql(ts.url(), CREATE, { input: { name: 'narrow', permissions: [{ actions: ['read'], scopeMode: 'object_kind', objectKind: 'credential' }] } }, scoped.token);
  t.match(narrower.body.data?.createAccessToken.token, TOKEN_FORMAT, 'a narrower scoped token may be minted');
  t.equal((await gql(ts.url(), REVOKE, { id: scoped.credentialId }, scoped.token)).body.data?.revokeAccessToken, true, 'it may revoke itself');
  t.equal((await gql(ts.url(), LIST, {}, scoped.token)).body.errors?.[0].extensions.code, 'UNAUTHENTICATED');
});

t.test('a caller without credential authority is refused; own tokens are allowed', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const alice = await insertEntity(ts, { name: 'alice' });
  const aliceToken = await tokenFor(ts, alice);
  const adminApi = await accessTokenFor(ts, admin);
  const refused: [string, string, Record<string, unknown>][] = [
    ['token for the admin', CREATE, { input: { name: 'x', scoped: false, permissions: [], subjectId: ADMIN_ID } }],
    ["list the admin's tokens", LIST, { s: ADMIN_ID }],
    ["revoke the admin's token", REVOKE, { id: adminApi.credentialId }],
    ["replace the admin's token", REPLACE, { id: adminApi.credentialId, p: [{ actions: ['read'], scopeMode: 'platform' }] }],
    ["list the admin's credentials", CREDS, { id: ADMIN_ID }],
    ["set the admin's password", `mutation ($id: ID!) { createPassword(entityId: $id, password: "a-long-enough-password") }`, { id: ADMIN_ID }],
  ];
  for (const [why, query, variables] of refused) {
    t.equal((await gql(ts.url(), query, variables, aliceToken)).body.errors?.[0].message, 'forbidden', why);
  }
  const own = await gql(ts.url(), CREATE, { input: { name: 'mine', scoped: false, permissions: [] } }, aliceToken);
  t.match(own.body.data?.createAccessToken.token, TOKEN_FORMAT);
  const mine = await gql(ts.url(), LIST, {}, aliceToken);
  t.equal(mine.body.data?.accessTokens.total, 1, 'own tokens only');
  t.equal((await gql(ts.url(), CREDS, { id: alice }, aliceToken)).body.data?.credentials.total, 2, 'own password and token');
  t.equal((await gql(ts.url(), LIST, { s: alice }, admin)).body.data?.accessTokens.total, 1, 'the platform admin sees them');
});

t.test('last use is recorded in batches, not per request', async (t) => {
  const ts = await startAuthService(t);
  const token = await accessTokenFor(ts, await adminToken(ts));
  for (let i = 0; i < 3; i++) t.ok((await gql(ts.url(), LIST, {}, token.token)).body.data);
  await ts.service.stop();
  const sql = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => sql.end());
  const [row] = await sql<{ last_used_at: Date | null }[]>`select last_used_at from credentials where id = ${token.credentialId}`;
  t.ok(row?.last_used_at, 'written when the service stops (and every 30 s while it runs)');
});

t.test('statements writing several credentials lock them in id order: no deadlock with a holder of some', async (t) => {
  // Every instance flushes its own batch of last uses, and deleting an entity revokes all its credentials:
  // a statement that locked in table or batch order could hold a later row while waiting on an earlier
  // one another holder takes next (the old UPDATE ... FROM unnest and the old revocation did).
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const holder = postgres(ts.db.url, { max: 2, onnotice: () => undefined });
  t.teardown(() => holder.end({ timeout: 1 }));
  const at = new Date();
  const cases: [string, (ids: string[], entityId: string) => Promise<unknown>, (ids: string[]) => Promise<number>][] = [
    ['a batch of last uses', (ids) => touchCredentials(ts.service.sql, ids.map((id) => ({ id, at }))),
      async (ids) => (await holder<{ n: number }[]>`select count(*)::int as n from credentials where id = any(${ids}::uuid[]) and last_used_at = ${at}`)[0]!.n],
    ['deleting their entity', async (_ids, entityId) => {
      const res = await gql(ts.url(), 'mutation ($id: ID!) { deleteEntity(id: $id) }', { id: entityId }, admin);
      if (!res.body.data?.deleteEntity) throw new Error(JSON.stringify(res.body.errors));
    }, async (ids) => (await holder<{ n: number }[]>`select count(*)::int as n from credentials where id = any(${ids}::uuid[]) and status = 'revoked'`)[0]!.n],
  ];
  for (const [name, write, written] of cases) {
    const owner = await insertEntity(ts, { name: `owner of two tokens (${name})` });
    const ownerToken = await tokenFor(ts, owner);
    const ids = [(await accessTokenFor(ts, ownerToken)).credentialId, (await accessTokenFor(ts, ownerToken)).credentialId].sort();
    const [low, high] = ids as [string, string];
    // The lower id moves after the higher one in the table and comes last in the batch: both plan orders
    // would meet the higher first.
    await holder`update credentials set name = name where id = ${low}`;
    let outcome: Promise<unknown> | undefined;
    await holder.begin(async (tx) => {
      await tx`select id from credentials where id = ${low} for update`;
      outcome = write([high, low], owner).then(() => 'done', (err: Error & { code?: string }) => err.code ?? err.message);
      await waitUntil(async () => (await holder`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query ilike '%update credentials%'`).length > 0);
      await tx`select id from credentials where id = ${high} for update`;
    });
    t.equal(await outcome, 'done', `${name}: waited its turn and finished`);
    t.equal(await written(ids), 2, `${name}: both credentials written`);
  }
});
