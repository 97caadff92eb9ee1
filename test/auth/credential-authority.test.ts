// Credential management follows the entity's OWNING tenant, never membership (SPEC.md rule 10).
import t from 'tap';
import { adminToken, insertEntity, insertTenant, makeTenantAdmin, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const CREATE_KEY = `mutation ($id: ID!) { createSharedKey(entityId: $id, input: {description: "d"}) { credentialId key expiresAt } }`;
const CREDS = `query ($id: ID!) { credentials(entityId: $id) { total items { id kind } } }`;
const SET_PW = `mutation ($id: ID!) { createPassword(entityId: $id, password: "a-long-enough-password") }`;
const TOKEN_FOR = `mutation ($id: ID!) { createAccessToken(input: {name: "x", scoped: false, permissions: [], subjectId: $id}) { credentialId } }`;
const REVOKE = `mutation ($id: ID!) { revokeCredential(credentialId: $id) }`;

t.test('a tenant admin manages credentials of its tenant\'s entities only', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const a = await insertTenant(ts, 'tenant-a');
  const b = await insertTenant(ts, 'tenant-b');
  const adminA = await insertEntity(ts, { name: 'admin-a' });
  const adminB = await insertEntity(ts, { name: 'admin-b' });
  await makeTenantAdmin(ts, a, adminA);
  await makeTenantAdmin(ts, b, adminB);
  const tokenA = await tokenFor(ts, adminA, { tenantId: a });
  const tokenB = await tokenFor(ts, adminB, { tenantId: b });
  const deviceA = await insertEntity(ts, { name: 'sensor', kind: 'device', tenantId: a });
  const deviceB = await insertEntity(ts, { name: 'sensor', kind: 'device', tenantId: b });
  // A global human who is even a member of tenant A: membership does not make A's admin its manager.
  const globalHuman = await insertEntity(ts, { name: 'global-human' });
  await ts.service.sql`insert into tenant_memberships (tenant_id, entity_id) values (${a}, ${globalHuman})`;
  const globalService = await insertEntity(ts, { name: 'global-service', kind: 'service' });
  const humanKey = (await gql(ts.url(), TOKEN_FOR, { id: globalHuman }, admin)).body.data!.createAccessToken.credentialId;
  const keyB = (await gql(ts.url(), CREATE_KEY, { id: deviceB }, admin)).body.data!.createSharedKey.credentialId;

  // Allowed: A's admin on A's device.
  const keyA = await gql(ts.url(), CREATE_KEY, { id: deviceA }, tokenA);
  t.ok(keyA.body.data?.createSharedKey.key, 'shared key for its own tenant\'s device');
  t.equal((await gql(ts.url(), CREDS, { id: deviceA }, tokenA)).body.data?.credentials.total, 1);
  t.equal((await gql(ts.url(), REVOKE, { id: keyA.body.data!.createSharedKey.credentialId }, tokenA)).body.data?.revokeCredential, true);

  const refused: [string, string, Record<string, unknown>, string][] = [
    ['global human: set password', SET_PW, { id: globalHuman }, tokenA],
    ['global human: list credentials', CREDS, { id: globalHuman }, tokenA],
    ['global human: mint a token', TOKEN_FOR, { id: globalHuman }, tokenA],
    ['global human: revoke its token', REVOKE, { id: humanKey }, tokenA],
    ['global service: shared key', CREATE_KEY, { id: globalService }, tokenA],
    ['other tenant: shared key', CREATE_KEY, { id: deviceB }, tokenA],
    ['other tenant: list', CREDS, { id: deviceB }, tokenA],
    ['other tenant: revoke', REVOKE, { id: keyB }, tokenA],
    ['other tenant: password', SET_PW, { id: deviceB }, tokenA],
    ['B cannot see A\'s device', CREDS, { id: deviceA }, tokenB],
    ['B cannot touch A\'s device', CREATE_KEY, { id: deviceA }, tokenB],
  ];
  for (const [why, query, variables, token] of refused) {
    t.match((await gql(ts.url(), query, variables, token)).body.errors?.[0], { message: 'forbidden', extensions: { code: 'FORBIDDEN' } }, why);
  }
  t.equal((await gql(ts.url(), CREDS, { id: globalHuman }, admin)).body.data?.credentials.total, 1, 'the platform admin manages global entities');
  await ts.service.audit.flush();
  const events = await ts.service.sql<{ event: string; tenant_id: string | null }[]>`
    select event, tenant_id from audit_log where event in ('shared_key.create', 'credential.revoke', 'access_token.create') order by id`;
  t.ok(events.some((e) => e.event === 'shared_key.create' && e.tenant_id === a), 'tenant-owned events carry the tenant');
  t.ok(events.some((e) => e.event === 'credential.revoke' && e.tenant_id === a));
  t.ok(events.some((e) => e.event === 'access_token.create' && e.tenant_id === null), 'platform events carry no tenant');
});
