// Two instances on one database: revocation and deletion reach the other instance's caches via NOTIFY.
import t from 'tap';
import { AUTH_ENV, accessTokenFor, adminToken, insertEntity, insertTenant, login, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';

const WHO = `query { accessTokens { total } }`;
const reason = async (base: string, token: string) => {
  const res = await gql(base, WHO, {}, token);
  return res.body.errors ? (res.body.errors[0].extensions.details?.reason ?? res.body.errors[0].message) : 'ok';
};

async function eventually(t: { pass(m: string): void; equal(a: unknown, b: unknown, m: string): void }, check: () => Promise<string>, expected: string, why: string) {
  const until = Date.now() + 3000;
  let last = '';
  while (Date.now() < until) {
    last = await check();
    if (last === expected) return t.pass(why);
    await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(last, expected, why);
}

t.test('logout, token revocation, entity deletion and tenant state reach every instance', async (t) => {
  const a = await startAuthService(t);
  const b = await startTestService(t, { ...AUTH_ENV }, a.db);
  const session = await login(a, 'admin', AUTH_ENV.SVC_ADMIN_SECRET!);
  t.equal(await reason(b.url(), session.token), 'ok', 'B verifies a token A issued (and caches it)');
  t.equal(await reason(b.url(), session.token), 'ok');
  await gql(a.url(), `mutation { logout }`, {}, session.token);
  await eventually(t, () => reason(b.url(), session.token), 'revoked_token', 'logout on A is refused on B');

  const api = await accessTokenFor(a, await adminToken(a));
  t.equal(await reason(b.url(), api.token), 'ok');
  await gql(a.url(), `mutation ($id: ID!) { revokeAccessToken(credentialId: $id) }`, { id: api.credentialId }, await adminToken(a));
  await eventually(t, () => reason(b.url(), api.token), 'revoked_token', 'a token revoked on A is refused on B');

  const user = await insertEntity(a, { name: 'user' });
  const userToken = await tokenFor(a, user);
  t.equal(await reason(b.url(), userToken), 'ok');
  await a.service.sql`update entities set deleted_at = now() where id = ${user}`;
  await eventually(t, () => reason(b.url(), userToken), 'inactive_token', 'the token of a deleted entity is refused');

  const tenant = await insertTenant(a, 'shop');
  const member = await insertEntity(a, { name: 'member', tenantId: tenant });
  const memberToken = await tokenFor(a, member, { tenantId: tenant });
  t.equal(await reason(b.url(), memberToken), 'ok');
  await a.service.sql`update tenants set status = 'inactive' where id = ${tenant}`;
  await eventually(t, () => reason(b.url(), memberToken), 'inactive_token', 'a session in an inactive tenant is refused');

  const device = await insertEntity(a, { name: 'dev', kind: 'device', tenantId: tenant });
  await a.service.sql`update tenants set status = 'active' where id = ${tenant}`;
  const key = (await gql(a.url(), `mutation ($id: ID!) { createSharedKey(entityId: $id) { credentialId key } }`, { id: device }, await adminToken(a))).body.data!.createSharedKey;
  t.ok(await b.service.auth.authenticateDeviceKey(key.key), 'B authenticates the device key (cached)');
  await gql(a.url(), `mutation ($id: ID!) { revokeCredential(credentialId: $id) }`, { id: key.credentialId }, await adminToken(a));
  await eventually(t, async () => ((await b.service.auth.authenticateDeviceKey(key.key)) ? 'accepted' : 'refused'), 'refused', 'a device key revoked on A is refused on B');

  const direct = await tokenFor(a, (await insertEntity(a, { name: 'other' })));
  t.equal(await reason(a.url(), direct), 'ok');
  await a.service.auth.invalidate({ entities: [] });
  t.equal(await reason(a.url(), direct), 'ok', 'the invalidation hook is safe to call with nothing to drop');
});
