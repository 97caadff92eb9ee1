// Login by e-mail address for humans created through createEntity (issue 22 point 1): attributes.email
// in any letter case, trimmed; a registered address first; two humans sharing an address need a tenant.
import t from 'tap';
import { adminToken, insertEntity, insertTenant, setPassword, startAuthService } from '../helpers/auth.js';
import { createEntity } from '../helpers/management.js';
import { gql } from '../helpers/service.js';

const LOGIN = `mutation ($input: LoginInput!) { login(input: $input) { entityId tenantId } }`;

t.test('humans created with createEntity log in with attributes.email', async (t) => {
  const ts = await startAuthService(t, { SVC_LOGIN_FAILURE_LIMIT: '100' });
  const admin = await adminToken(ts);
  const login = async (identifier: string, secret: string, extra: Record<string, unknown> = {}) => {
    const res = await gql(ts.url(), LOGIN, { input: { identifier, secret, ...extra } });
    return res.body.errors ? { error: res.body.errors[0].message as string, code: res.body.errors[0].extensions.code as string } : res.body.data?.login;
  };

  const ada = await createEntity(ts, admin, { kind: 'human', name: 'ada', attributes: { email: '  Ada.Lovelace@Example.COM ' } });
  await setPassword(ts, ada, 'ada-password-0123');
  for (const identifier of ['ada.lovelace@example.com', 'ADA.LOVELACE@EXAMPLE.COM', '  Ada.Lovelace@example.com\t']) {
    t.same(await login(identifier, 'ada-password-0123'), { entityId: ada, tenantId: null }, `login as ${JSON.stringify(identifier)}`);
  }
  t.same(await login('ada.lovelace@example.com', 'wrong-password-0000'), { error: 'invalid credentials', code: 'UNAUTHENTICATED' });

  // A registered address is looked up first: a createEntity human claiming it in attributes does not win.
  const registered = await insertEntity(ts, { name: 'grace', email: 'grace@example.com' });
  await setPassword(ts, registered, 'grace-password-0123');
  const claimer = await createEntity(ts, admin, { kind: 'human', name: 'claimer', attributes: { email: 'GRACE@example.com' } });
  await setPassword(ts, claimer, 'claimer-password-0123');
  t.same(await login('Grace@Example.com', 'grace-password-0123'), { entityId: registered, tenantId: null }, 'the registered address');
  t.same(await login('grace@example.com', 'claimer-password-0123'), { error: 'invalid credentials', code: 'UNAUTHENTICATED' }, 'never the claimer');

  // A human with a registered address is not found by an attributes.email that differs from it.
  const both = await insertEntity(ts, { name: 'both', email: 'both@example.com' });
  await ts.service.sql`update entities set attributes = '{"email": "other@example.com"}' where id = ${both}`;
  await setPassword(ts, both, 'both-password-01234');
  t.same(await login('other@example.com', 'both-password-01234'), { error: 'invalid credentials', code: 'UNAUTHENTICATED' });

  // Two live humans sharing an address: a tenant decides; a deleted one no longer counts.
  const acme = await insertTenant(ts, 'acme');
  const one = await createEntity(ts, admin, { kind: 'human', name: 'twin-one', attributes: { email: 'twin@example.com' } });
  const two = await createEntity(ts, admin, { kind: 'human', name: 'twin-two', attributes: { email: 'Twin@Example.com' } });
  await setPassword(ts, one, 'twin-one-password-0');
  await setPassword(ts, two, 'twin-two-password-0');
  await ts.service.sql`insert into tenant_memberships (tenant_id, entity_id) values (${acme}, ${two})`;
  t.same(await login('twin@example.com', 'twin-two-password-0'), { error: 'tenant_id or tenant_alias required for this identifier', code: 'BAD_REQUEST' });
  t.same(await login('twin@example.com', 'twin-two-password-0', { tenantId: acme }), { entityId: two, tenantId: acme }, 'the tenant picks its member');
  t.same(await login('twin@example.com', 'twin-two-password-0', { tenantAlias: 'acme' }), { entityId: two, tenantId: acme });
  t.same(await login('twin@example.com', 'twin-one-password-0', { tenantId: acme }), { error: 'invalid credentials', code: 'UNAUTHENTICATED' });
  const del = await gql(ts.url(), `mutation ($id: ID!) { deleteEntity(id: $id) }`, { id: two }, admin);
  t.equal(del.body.data?.deleteEntity, true);
  t.same(await login('twin@example.com', 'twin-one-password-0'), { entityId: one, tenantId: null }, 'one live human left');

  await ts.service.audit.flush();
  const [row] = await ts.service.sql<{ n: number }[]>`
    select count(*)::int as n from audit_log where event = 'auth.login' and outcome = 'deny' and details->>'reason' = 'ambiguous_identifier'`;
  t.equal(row?.n, 1, 'the ambiguous attempt is audited');
});
