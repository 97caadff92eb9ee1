// Issue 21 points 3 and 5, issue 35 point 1: an id the caller may not see answers exactly like an id that
// does not exist, and nothing is written in another tenant. addOwnership checks its owner like the owned
// entity (both answered as missing); elsewhere an unknown id answers as another tenant's object does
// ('forbidden', NOT_FOUND only to a caller who could have read it, src/access/guard.ts `missing`);
// /authz/check, GraphQL authzCheck/authzBulkCheck and gRPC Check, asked by a tenant's checker about
// another tenant's subject, answer 'subject not found' (not 'no matching allow policy' or 'subject is
// not active'), on the first call and from the memo alike. (Point 5's shared-key oracle is in
// test/auth/shared-keys.test.ts.)
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { loadServices, serviceOf } from '../../src/grpc/server.js';
import { AUTH_ENV } from '../helpers/auth.js';
import { createEntity, fails, ok, twoTenants } from '../helpers/management.js';
import { gql, startTestService } from '../helpers/service.js';

const UNKNOWN = '6f1c2a3e-0000-4000-8000-000000000999';

const ts = await startTestService(t, { ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0' });
const sql = ts.service.sql;
const { admin, alice, bob, dave, acme, globex } = await twoTenants(ts);
const acmeDevice = await createEntity(ts, alice.token, { kind: 'device', name: 'acme-device', tenantId: acme });
const acmeService = await createEntity(ts, alice.token, { kind: 'service', name: 'acme-service', tenantId: acme });
const gDevice = await createEntity(ts, bob.token, { kind: 'device', name: 'globex-device', tenantId: globex });
const channel = (await ok(ts, alice.token, `mutation ($i: CreateResourceInput!) { createResource(input: $i) { id } }`,
  { i: { kind: 'channel', name: 'acme-channel', tenantId: acme } })).createResource.id as string;

type Errors = { message: string; extensions: { code: string } }[];
const shape = (errors: Errors) => errors.map((e) => ({ code: e.extensions.code, message: e.message }));
const OWN = `mutation ($a: ID!, $b: ID!) { addOwnership(ownerId: $a, ownedId: $b) { ownerId ownedId } }`;

t.test('addOwnership: the owner is checked like the owned entity', async (t) => {
  const unknownOwner = shape(await fails(ts, alice.token, OWN, { a: UNKNOWN, b: acmeDevice }));
  t.same(unknownOwner, [{ code: 'NOT_FOUND', message: 'entity not found' }]);
  t.same(shape(await fails(ts, alice.token, OWN, { a: gDevice, b: acmeDevice })), unknownOwner, "another tenant's owner reads as unknown");
  t.same(shape(await fails(ts, alice.token, OWN, { a: acmeDevice, b: gDevice })), unknownOwner, "another tenant's owned entity too");
  t.same(shape(await fails(ts, alice.token, OWN, { a: dave.id, b: acmeDevice })), unknownOwner, 'a global human the tenant admin cannot see');
  t.same(shape(await fails(ts, admin, OWN, { a: gDevice, b: acmeDevice })), [{ code: 'BAD_REQUEST', message: 'the owner must belong to the tenant of the owned entity' }],
    'a platform administrator sees both, and is refused all the same');
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from ownerships`;
  t.equal(n, 0, 'nothing was written');

  t.match((await ok(ts, alice.token, OWN, { a: acmeService, b: acmeDevice })).addOwnership, { ownerId: acmeService, ownedId: acmeDevice }, 'same tenant');
  t.match((await ok(ts, admin, OWN, { a: dave.id, b: acmeDevice })).addOwnership, { ownerId: dave.id }, 'a global owner, by a platform administrator');
  t.same((await ok(ts, bob.token, `query ($a: ID!) { ownedEntities(ownerId: $a) { id } }`, { a: gDevice })).ownedEntities, [], "Globex's device owns nothing in Acme");
});

t.test('issue 35.1: an unknown id answers each caller as another tenant\'s object does', async (t) => {
  const acmeGroup = (await ok(ts, alice.token, `mutation ($i: CreateGroupInput!) { createObjectGroup(input: $i) { id } }`, { i: { name: 'a-objects', tenantId: acme } })).createObjectGroup.id as string;
  const acmeRole = (await ok(ts, alice.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'a-role', tenantId: acme } })).createRole.id as string;
  const FORBIDDEN = [{ code: 'FORBIDDEN', message: 'forbidden' }];
  // By id alone: Globex's admin may read neither; only a platform reader is told the id names nothing.
  const byId: [string, string, Record<string, unknown>][] = [
    ['entity', `query ($id: ID!) { entity(id: $id) { id } }`, { id: '$' }],
    ['updateEntity', `mutation ($id: ID!) { updateEntity(id: $id, input: {name: "x"}) { id } }`, { id: '$' }],
    ['credentials', `query ($id: ID!) { credentials(entityId: $id) { total } }`, { id: '$' }],
    ['group', `query ($id: ID!) { group(id: $id) { id } }`, { id: '$g' }],
    ['role', `query ($id: ID!) { role(id: $id) { id } }`, { id: '$r' }],
    ['tenant', `query ($id: ID!) { tenant(id: $id) { id } }`, { id: '$t' }],
    ['tenantMembers', `query ($id: ID!) { tenantMembers(tenantId: $id) { total } }`, { id: '$t' }],
  ];
  const real: Record<string, string> = { $: acmeDevice, $g: acmeGroup, $r: acmeRole, $t: acme };
  for (const [name, query, vars] of byId) {
    const fill = (ids: Record<string, string> | null) => Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, ids ? ids[v as string] : UNKNOWN]));
    t.same(shape(await fails(ts, bob.token, query, fill(real))), FORBIDDEN, `${name}: Acme's object, to Globex's admin`);
    t.same(shape(await fails(ts, bob.token, query, fill(null))), FORBIDDEN, `${name}: an unknown id, the same`);
    t.match(shape(await fails(ts, admin, query, fill(null))), [{ code: 'NOT_FOUND' }], `${name}: NOT_FOUND to the platform administrator`);
  }
  // Named inside a tenant the caller reads: another tenant's object and an unknown id both read as missing there.
  const ASSIGN = `mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }`;
  const gRole = (await ok(ts, bob.token, `mutation ($i: CreateRoleInput!) { createRole(input: $i) { id } }`, { i: { name: 'g-role', tenantId: globex } })).createRole.id as string;
  const assign = (subjectId: string, roleId: string) => fails(ts, bob.token, ASSIGN, { i: { tenantId: globex, subjectKind: 'entity', subjectId, roleId } });
  t.same(shape(await assign(acmeDevice, gRole)), [{ code: 'NOT_FOUND', message: 'subject entity not found' }], "Acme's subject, in Globex");
  t.same(shape(await assign(UNKNOWN, gRole)), shape(await assign(acmeDevice, gRole)), 'an unknown subject, the same');
  t.same(shape(await assign(gDevice, acmeRole)), [{ code: 'NOT_FOUND', message: 'role not found' }], "Acme's role, in Globex");
  t.same(shape(await assign(gDevice, UNKNOWN)), shape(await assign(gDevice, acmeRole)), 'an unknown role, the same');
  // A pair across tenants is refused on the grants before its tenants are compared.
  const CONTAIN = `mutation ($e: ID!, $g: ID!) { addEntityToObjectGroup(entityId: $e, objectGroupId: $g) { id } }`;
  t.same(shape(await fails(ts, bob.token, CONTAIN, { e: gDevice, g: acmeGroup })), FORBIDDEN, "Globex's device into Acme's group");
  t.same(shape(await fails(ts, bob.token, CONTAIN, { e: gDevice, g: UNKNOWN })), FORBIDDEN, 'into an unknown group, the same');
  t.same(shape(await fails(ts, admin, CONTAIN, { e: gDevice, g: acmeGroup })), [{ code: 'BAD_REQUEST', message: 'the entity and the object group belong to different tenants' }],
    'a platform administrator, who may act on both, is told why');
});

t.test('runtime checks: another tenant\'s subject answers like an unknown one, on every API', async (t) => {
  const Client = serviceOf(loadServices(), 'AuthzService');
  const client = new Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure()) as any;
  t.teardown(() => client.close());
  const viaGrpc = (subject: string, token: string) => new Promise<{ allowed: boolean; reason: string }>((resolve, reject) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    client.Check({ subject_id: subject, action: 'publish', resource_id: channel }, md, (err: Error | null, res: any) => (err ? reject(err) : resolve(res)));
  });
  const viaHttp = async (subject: string, token: string) => {
    const res = await fetch(`${ts.url()}/authz/check`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ subject_id: subject, action: 'publish', resource_id: channel }),
    });
    const body = (await res.json()) as { allowed: boolean; reason: string; details?: unknown };
    return { status: res.status, allowed: body.allowed, reason: body.reason, details: body.details };
  };
  const viaGraphql = async (subject: string, token: string) =>
    (await ok(ts, token, `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed reason } }`, { i: { subjectId: subject, action: 'publish', resourceId: channel } })).authzCheck;
  const viaBulk = async (subject: string, token: string) => {
    const res = await fetch(`${ts.url()}/authz/check/bulk`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ subject_id: subject, resource_id: channel, actions: ['publish', 'subscribe'] }),
    });
    return ((await res.json()) as { results: Record<string, { reason: string }> }).results;
  };

  const asUnknown = { http: await viaHttp(UNKNOWN, alice.token), graphql: await viaGraphql(UNKNOWN, alice.token), grpc: await viaGrpc(UNKNOWN, alice.token), bulk: await viaBulk(UNKNOWN, alice.token) };
  t.match(asUnknown.http, { status: 200, allowed: false, reason: 'subject not found' });
  const answers = async (subject: string, token: string) => ({
    http: await viaHttp(subject, token), graphql: await viaGraphql(subject, token), grpc: await viaGrpc(subject, token), bulk: await viaBulk(subject, token),
  });
  // The subject's own id is echoed in details: compare with it blanked out.
  const blank = (a: typeof asUnknown, id: string) => JSON.parse(JSON.stringify(a).replaceAll(id, '<subject>'));
  const sameAsUnknown = async (subject: string, what: string) =>
    t.same(blank(await answers(subject, alice.token), subject), blank(asUnknown, UNKNOWN), what);

  await sameAsUnknown(gDevice, "Globex's device, asked by Acme's admin");
  // The platform administrator's real answer memoises the decision; the tenant admin must not read it.
  t.match(await viaHttp(gDevice, admin), { allowed: false, reason: 'no matching allow policy' }, 'the platform administrator gets the real answer');
  await sameAsUnknown(gDevice, 'still unknown once the real decision is memoised');
  await sql`update entities set status = 'inactive' where id = ${gDevice}`;
  await ts.service.authz.invalidate({ kind: 'subjects', entityIds: [gDevice] });
  t.match(await viaHttp(gDevice, admin), { reason: 'subject is not active' });
  await sameAsUnknown(gDevice, 'an inactive foreign subject: no status oracle either');

  t.match(await viaHttp(acmeDevice, alice.token), { status: 200, allowed: false, reason: 'no matching allow policy' }, "the tenant's own subject: the real answer");
  t.match(await viaHttp(dave.id, alice.token), { reason: 'no matching allow policy' }, 'a global subject: the real answer');
  t.match(await viaGrpc(acmeDevice, alice.token), { reason: 'no matching allow policy' });
  t.match(shape(await fails(ts, bob.token, `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed } }`, { i: { subjectId: gDevice, action: 'publish', resourceId: channel } })),
    [{ code: 'FORBIDDEN', message: 'forbidden' }], "Globex's admin may not ask about Acme's channel at all");
});
