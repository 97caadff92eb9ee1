// The runtime check APIs end to end: POST /authz/check, /check/bulk, /explain, GraphQL authzCheck,
// authzBulkCheck, authzExplain and gRPC AuthzService.Check, with real bearer tokens, caller gates and audit.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { request } from 'undici';
import { loadServices, serviceOf } from '../../src/grpc/server.js';
import { accessTokenFor, adminToken, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { seedWorld, type World } from './helpers/world.js';

const world: World = {
  tenants: { acme: {}, globex: {}, icy: { status: 'frozen' } },
  entities: {
    alice: { kind: 'human' },
    checker: { kind: 'human' },
    gadmin: { kind: 'human' },
    nobody: { kind: 'human' },
    dev: { kind: 'device', tenant: 'acme' },
  },
  resources: {
    ch: { kind: 'channel', tenant: 'acme', attributes: { zone: 'a' } },
    ch2: { kind: 'channel', tenant: 'acme' },
    gch: { kind: 'channel', tenant: 'globex' },
    ich: { kind: 'channel', tenant: 'icy' },
  },
  groups: {},
  objectMembers: [],
  principalMembers: [],
  blocks: {
    devPub: { scope: 'object', tenant: 'acme', object: 'ch', actions: ['publish', 'subscribe'] },
    devNoSubZoneA: { scope: 'tenant', tenant: 'acme', effect: 'deny', actions: ['subscribe'], conditions: { 'resource.attributes.zone': 'a' } },
    devReadIfMfa: { scope: 'tenant', tenant: 'acme', actions: ['read'], conditions: { 'context.mfa_verified': true } },
    aliceRead: { scope: 'tenant', tenant: 'acme', actions: ['read'] },
    acmeCheck: { scope: 'tenant', tenant: 'acme', actions: ['authz.check'] },
    globexAdmin: { scope: 'tenant', tenant: 'globex', actions: ['manage', 'read', 'policy.manage', 'role.manage'] },
  },
  roles: { 'device-role': { tenant: 'acme', blocks: ['devPub', 'devNoSubZoneA', 'devReadIfMfa'] }, reader: { tenant: 'acme', blocks: ['aliceRead'] },
    'checker-role': { tenant: 'acme', blocks: ['acmeCheck'] }, 'globex-admin': { tenant: 'globex', blocks: ['globexAdmin'] } },
  assignments: [
    { entity: 'dev', role: 'device-role', tenant: 'acme' },
    { entity: 'alice', role: 'reader', tenant: 'acme' },
    { entity: 'checker', role: 'checker-role', tenant: 'acme' },
    { entity: 'gadmin', role: 'globex-admin', tenant: 'globex' },
  ],
  policies: [],
  credentials: {},
};

t.test('runtime check APIs', async (t) => {
  const ts = await startAuthService(t, { SVC_GRPC_ADDR: '127.0.0.1:0', SVC_AUTHZ_AUDIT_ALLOWED: 'all' });
  const ids = await seedWorld(ts.service.sql as never, world);
  const admin = await adminToken(ts);
  const [alice, checker, gadmin, nobody] = (await Promise.all(['alice', 'checker', 'gadmin', 'nobody'].map((n) => tokenFor(ts, ids[n] as string)))) as [string, string, string, string];

  async function post(path: string, body: unknown, token?: string) {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await request(`${ts.url()}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    return { status: res.statusCode, body: (await res.body.json()) as any };
  }
  const devOn = (resource: string, action: string, extra: Record<string, unknown> = {}) => ({ subject_id: ids.dev, action, resource_id: ids[resource], ...extra });

  await t.test('authentication and validation', async (t) => {
    t.same(await post('/authz/check', devOn('ch', 'publish')), { status: 401, body: { error: 'missing Authorization header' } });
    const bad = await post('/authz/check', devOn('ch', 'publish'), 'not-a-token');
    t.equal(bad.status, 401, 'an invalid token is refused');
    t.type(bad.body.error, 'string');
    t.same(await post('/authz/check', { action: 'read', resource_id: ids.ch }, admin), { status: 400, body: { error: 'subject_id is required' } });
    t.same(await post('/authz/check', { subject_id: ids.dev, action: 'read' }, admin), { status: 400, body: { error: 'resource_id or object_kind is required' } });
    t.same(await post('/authz/check', { subject_id: 'not-a-uuid', action: 'read', resource_id: ids.ch }, admin), { status: 400, body: { error: 'subject_id must be a UUID' } },
      'a malformed request stays a 400');
    const latin1 = await request(`${ts.url()}/authz/check`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
      body: Buffer.from(`{"subject_id":"${ids.dev}","action":"read","resource_id":"${ids.ch}","context":{"site":"caf\xe9"}}`, 'latin1'),
    });
    t.same({ status: latin1.statusCode, body: await latin1.body.json() }, { status: 400, body: { error: 'request body is not valid UTF-8' } });
    const lone = await post('/authz/check', devOn('ch', 'read', { context: { 'site\ud800': 1 } }), admin);
    t.same(lone, { status: 400, body: { error: 'request body holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text' } }, 'in a key too');
    t.same(await post('/authz/check', { subject_id: ids.dev, action: 'read', object_kind: 'widget', object_id: ids.ch }, admin),
      { status: 400, body: { error: "unknown object_kind 'widget'; expected one of entity, resource, group, tenant, role, policy, credential, api_endpoint, audit_log, signing_key, platform" } });
  });

  await t.test('decisions', async (t) => {
    t.same(await post('/authz/check', devOn('ch', 'publish'), admin), { status: 200, body: { allowed: true, reason: 'allowed' } });
    t.same(await post('/authz/check', devOn('ch2', 'publish'), admin), { status: 200, body: { allowed: false, reason: 'no matching allow policy' } });
    t.same(await post('/authz/check', devOn('ch', 'subscribe'), admin), { status: 200, body: { allowed: false, reason: "explicitly denied by role 'device-role' block" } });
    t.same((await post('/authz/check', devOn('ch', 'read', { context: { mfa_verified: true } }), admin)).body.allowed, true, 'context feeds conditions');
    t.same((await post('/authz/check', devOn('ch', 'read'), admin)).body.allowed, false);
    t.same(await post('/authz/check', { subject_id: ids.dev, action: 'read', object_kind: 'resource', object_id: ids.ich }, admin),
      { status: 200, body: { allowed: false, reason: 'tenant is frozen', details: { tenant_id: ids.icy, tenant_status: 'frozen' } } });
  });

  await t.test('who may ask', async (t) => {
    t.same((await post('/authz/check', { subject_id: ids.alice, action: 'read', resource_id: ids.ch }, alice)).body, { allowed: true, reason: 'allowed' }, 'about yourself');
    t.same((await post('/authz/check', devOn('ch', 'publish'), checker)).body, { allowed: true, reason: 'allowed' }, 'authz.check on the tenant');
    t.same(await post('/authz/check', { subject_id: ids.dev, action: 'read', resource_id: ids.gch }, checker), { status: 403, body: { error: 'forbidden' } }, 'not on another tenant');
    t.same(await post('/authz/check', devOn('ch', 'publish'), nobody), { status: 403, body: { error: 'forbidden' } }, 'no authz.check');
    t.same(await post('/authz/check', devOn('ch', 'publish'), alice), { status: 403, body: { error: 'forbidden' } }, 'read is not authz.check');
    t.same(await post('/authz/check', devOn('ch', 'publish'), gadmin), { status: 403, body: { error: 'forbidden' } }, "another tenant's admin");
    t.same((await post('/authz/check', { subject_id: ids.dev, action: 'read', resource_id: ids.gch }, gadmin)).status, 200, 'its own tenant is fine');
    t.same(await post('/authz/explain', devOn('ch', 'publish'), checker), { status: 403, body: { error: 'forbidden' } }, 'explain needs platform policy.manage');
  });

  await t.test('an answer given from memory stops once the caller logs out', async (t) => {
    const session = await tokenFor(ts, ids.checker as string);
    for (let i = 0; i < 3; i++) {
      t.same(await post('/authz/check', devOn('ch', 'publish'), session), { status: 200, body: { allowed: true, reason: 'allowed' } }, `check ${i + 1} (token, gate and decision memoised after the first)`);
    }
    t.equal((await gql(ts.url(), 'mutation { logout }', {}, session)).body.data?.logout, true);
    t.equal((await post('/authz/check', devOn('ch', 'publish'), session)).status, 401, 'the ended session is refused at once');
    t.same((await post('/authz/check', devOn('ch', 'publish'), checker)).body, { allowed: true, reason: 'allowed' }, 'another session of the same caller is unaffected');
  });

  await t.test('the same body asked again follows grant changes (parsed once, never answered stale)', async (t) => {
    const session = await tokenFor(ts, ids.checker as string);
    const body = { subject_id: ids.alice, action: 'read', resource_id: ids.ch };
    const assignmentOf = async (entity: string) => {
      const listed = await gql(ts.url(), 'query ($s: ID) { roleAssignments(subjectId: $s) { items { id } } }', { s: ids[entity] }, admin);
      return ((listed.body.data as any).roleAssignments.items[0] as { id: string }).id;
    };
    const unassign = async (entity: string) =>
      t.equal((await gql(ts.url(), 'mutation ($id: ID!) { deleteRoleAssignment(id: $id) }', { id: await assignmentOf(entity) }, admin)).body.data?.deleteRoleAssignment, true);
    const reassign = async (entity: string, role: string) => {
      const created = await gql(ts.url(), 'mutation ($i: CreateRoleAssignmentInput!) { createRoleAssignment(input: $i) { id } }',
        { i: { tenantId: ids.acme, subjectKind: 'entity', subjectId: ids[entity], roleId: ids[role] } }, admin);
      t.notOk(created.body.errors, `${role} given back to ${entity}`);
    };
    for (let i = 0; i < 2; i++) t.same((await post('/authz/check', body, session)).body, { allowed: true, reason: 'allowed' }, `asked ${i + 1}`);
    await unassign('alice');
    t.same((await post('/authz/check', body, session)).body, { allowed: false, reason: 'no matching allow policy' }, 'the subject lost its grant: answered at once');
    await reassign('alice', 'reader');
    t.same((await post('/authz/check', body, session)).body, { allowed: true, reason: 'allowed' }, 'and got it back');
    await unassign('checker');
    t.same(await post('/authz/check', body, session), { status: 403, body: { error: 'forbidden' } }, 'the caller lost authz.check: refused at once');
    await reassign('checker', 'checker-role');
  });

  await t.test('a scoped token narrows answers about yourself', async (t) => {
    const scoped = await accessTokenFor(ts, alice, [{ actions: ['read'], scopeMode: 'object', objectId: ids.ch2 }]);
    t.same((await post('/authz/check', { subject_id: ids.alice, action: 'read', resource_id: ids.ch }, scoped.token)).body,
      { allowed: false, reason: 'denied by access token permission ceiling', details: { credential_id: scoped.credentialId } });
    t.same((await post('/authz/check', { subject_id: ids.alice, action: 'read', resource_id: ids.ch2 }, scoped.token)).body, { allowed: true, reason: 'allowed' });
    const bulk = await post('/authz/check/bulk', { subject_id: ids.alice, resource_id: ids.ch, actions: ['read'] }, scoped.token);
    t.same(bulk.body.results, { read: { allowed: false, reason: 'denied by access token permission ceiling' } });
  });

  await t.test('an unknown or inapplicable action is a decision, not a request error', async (t) => {
    t.same(await post('/authz/check', devOn('ch', 'execute'), admin), {
      status: 200, body: { allowed: false, reason: "action 'execute' is not valid for resource:channel", details: { action: 'execute', object_kind: 'resource', object_type: 'resource:channel' } },
    });
    t.same(await post('/authz/check', devOn('ch', 'fly'), admin), { status: 200, body: { allowed: false, reason: "unknown action 'fly'", details: { action: 'fly' } } });
    t.same(await post('/authz/check', { subject_id: ids.alice, action: 'publish', object_kind: 'entity', object_id: ids.dev }, admin), {
      status: 200, body: { allowed: false, reason: "action 'publish' is not valid for entity:device", details: { action: 'publish', object_kind: 'entity', object_type: 'entity:device' } },
    });
    const bulk = await post('/authz/check/bulk', { subject_id: ids.dev, resource_id: ids.ch, actions: ['publish', 'fly', 'execute', 'delete'] }, admin);
    t.same(bulk.body.results, {
      publish: { allowed: true, reason: 'allowed' },
      fly: { allowed: false, reason: "unknown action 'fly'" },
      execute: { allowed: false, reason: "action 'execute' is not valid for resource:channel" },
      delete: { allowed: false, reason: 'no matching allow policy' },
    }, 'a bulk check answers every item');
    const explained = await post('/authz/explain', devOn('ch', 'execute'), admin);
    t.equal(explained.status, 200);
    t.match(explained.body, { allowed: false, reason: "action 'execute' is not valid for resource:channel", subject: { id: ids.dev }, resource: { id: ids.ch, type: 'resource:channel' },
      capability: { name: 'execute' }, matched_binding: null, evaluated_bindings: [] });
    const gqlBulk = await gql(ts.url(), `query ($i: [AuthzCheckInput!]!) { authzBulkCheck(input: $i) { allowed reason details } }`, { i: [
      { subjectId: ids.dev, action: 'publish', resourceId: ids.ch },
      { subjectId: ids.dev, action: 'publish', objectKind: 'entity', objectId: ids.dev },
      { subjectId: ids.dev, action: 'subscribe', resourceId: ids.ch2 },
    ] }, checker);
    t.same(gqlBulk.body.data?.authzBulkCheck, [
      { allowed: true, reason: 'allowed', details: null },
      { allowed: false, reason: "action 'publish' is not valid for entity:device", details: { action: 'publish', object_kind: 'entity', object_type: 'entity:device' } },
      { allowed: false, reason: 'no matching allow policy', details: null },
    ]);
    const gqlExplain = await gql(ts.url(), `query ($i: AuthzCheckInput!) { authzExplain(input: $i) { allowed reason evaluatedBindings } }`,
      { i: { subjectId: ids.dev, action: 'fly', resourceId: ids.ch } }, admin);
    t.same(gqlExplain.body.data?.authzExplain, { allowed: false, reason: "unknown action 'fly'", evaluatedBindings: [] });
    const malformed = await gql(ts.url(), `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed } }`, { i: { subjectId: 'x', action: 'read', resourceId: ids.ch } }, admin);
    t.match(malformed.body.errors?.[0], { extensions: { code: 'BAD_REQUEST' } }, 'a subject id that is not a UUID stays a request error');
  });

  await t.test('bulk', async (t) => {
    const res = await post('/authz/check/bulk', { subject_id: ids.dev, resource_id: ids.ch, actions: ['publish', 'subscribe', 'delete', 'execute'] }, admin);
    t.same(res, {
      status: 200,
      body: {
        subject_id: ids.dev, resource_id: ids.ch,
        results: {
          publish: { allowed: true, reason: 'allowed' },
          subscribe: { allowed: false, reason: "explicitly denied by role 'device-role' block" },
          delete: { allowed: false, reason: 'no matching allow policy' },
          execute: { allowed: false, reason: "action 'execute' is not valid for resource:channel" },
        },
      },
    });
    t.same(await post('/authz/check/bulk', { subject_id: ids.dev, resource_id: ids.ch, actions: [] }, admin), { status: 400, body: { error: 'actions must contain at least one item' } });
    t.same(await post('/authz/check/bulk', { subject_id: ids.dev, resource_id: ids.ch, actions: Array(21).fill('read') }, admin), { status: 400, body: { error: 'actions must contain at most 20 items' } });
  });

  await t.test('explain', async (t) => {
    const res = await post('/authz/explain', devOn('ch', 'subscribe', { context: {} }), admin);
    t.equal(res.status, 200);
    const e = res.body;
    t.match(e, { allowed: false, reason: "explicitly denied by role 'device-role' block", subject: { id: ids.dev, kind: 'device', status: 'active' },
      resource: { id: ids.ch, kind: 'resource', type: 'resource:channel', tenant_id: ids.acme }, capability: { name: 'subscribe' } });
    t.match(e.matched_binding, { block_id: ids.devNoSubZoneA, effect: 'deny', grant_kind: 'role', role_name: 'device-role', via: 'direct', result: 'matched' }, 'the deny that won');
    const byBlock = Object.fromEntries(e.evaluated_bindings.map((b: any) => [b.block_id, b]));
    t.match(byBlock[ids.devPub as string], { result: 'matched', overridden_by: ids.devNoSubZoneA });
    t.match(byBlock[ids.devReadIfMfa as string], { result: 'skipped', skip_reason: "block does not grant 'subscribe'" });
    const failed = (await post('/authz/explain', devOn('ch', 'read'), admin)).body;
    t.match(failed.evaluated_bindings.find((b: any) => b.block_id === ids.devReadIfMfa), { result: 'skipped', skip_reason: "condition 'context.mfa_verified' (eq true) failed: field is missing" }, 'which condition failed');
    t.equal(failed.reason, 'no matching allow policy');
  });

  await t.test('GraphQL', async (t) => {
    const check = await gql(ts.url(), `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed reason details } }`,
      { i: { subjectId: ids.dev, action: 'publish', resourceId: ids.ch } }, checker);
    t.same(check.body, { data: { authzCheck: { allowed: true, reason: 'allowed', details: null } } });
    const refused = await gql(ts.url(), `query ($i: AuthzCheckInput!) { authzCheck(input: $i) { allowed } }`, { i: { subjectId: ids.dev, action: 'publish', resourceId: ids.ch } }, nobody);
    t.match(refused.body.errors?.[0], { message: 'forbidden', extensions: { code: 'FORBIDDEN' } });
    const bulk = await gql(ts.url(), `mutation ($i: [AuthzCheckInput!]!) { authzBulkCheck(input: $i) { allowed reason } }`,
      { i: [{ subjectId: ids.dev, action: 'publish', resourceId: ids.ch }, { subjectId: ids.dev, action: 'read', objectKind: 'resource', objectId: ids.gch }] }, checker);
    t.same(bulk.body.data?.authzBulkCheck, [{ allowed: true, reason: 'allowed' }, { allowed: false, reason: 'forbidden' }]);
    const explain = await gql(ts.url(), `mutation ($i: AuthzCheckInput!) { authzExplain(input: $i) { allowed reason matchedBinding evaluatedBindings } }`,
      { i: { subjectId: ids.dev, action: 'publish', resourceId: ids.ch } }, admin);
    t.match(explain.body.data?.authzExplain, { allowed: true, reason: 'allowed', matchedBinding: { block_id: ids.devPub, effect: 'allow' } });
    const anonymous = await gql(ts.url(), `{ authzCheck(input: {subjectId: "${ids.dev}", action: "read", resourceId: "${ids.ch}"}) { allowed } }`);
    t.match(anonymous.body.errors?.[0], { message: 'missing authentication', extensions: { code: 'UNAUTHENTICATED' } });
  });

  await t.test('gRPC AuthzService.Check', async (t) => {
    const Client = serviceOf(loadServices(), 'AuthzService');
    const client = new Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure()) as any;
    t.teardown(() => client.close());
    const call = (req: Record<string, unknown>, token?: string) => new Promise<{ err: grpc.ServiceError | null; res: any }>((resolve) => {
      const md = new grpc.Metadata();
      if (token) md.set('authorization', `Bearer ${token}`);
      client.Check(req, md, (err: grpc.ServiceError | null, res: any) => resolve({ err, res }));
    });
    t.match(await call({ subject_id: ids.dev, action: 'publish', resource_id: ids.ch }, checker), { err: null, res: { allowed: true, reason: 'allowed' } });
    t.match(await call({ subject_id: ids.dev, action: 'read', resource_id: ids.ch, context: { mfa_verified: 'true' } }, checker), { res: { allowed: true } });
    t.match(await call({ subject_id: ids.dev, action: 'publish', object_kind: 'resource', object_id: ids.ch2 }, checker), { res: { allowed: false, reason: 'no matching allow policy' } });
    t.match(await call({ subject_id: ids.dev, action: 'publish', resource_id: ids.ch }), { err: { code: grpc.status.UNAUTHENTICATED } });
    t.match(await call({ subject_id: ids.dev, action: 'publish', resource_id: ids.ch }, nobody), { err: { code: grpc.status.PERMISSION_DENIED, details: 'forbidden' } });
    t.match(await call({ subject_id: ids.dev, action: 'fly', resource_id: ids.ch }, checker), { err: null, res: { allowed: false, reason: "unknown action 'fly'" } });
    t.match(await call({ subject_id: ids.dev, action: 'execute', resource_id: ids.ch }, checker), { err: null, res: { allowed: false, reason: "action 'execute' is not valid for resource:channel" } });
    t.match(await call({ subject_id: 'not-a-uuid', action: 'read', resource_id: ids.ch }, checker), { err: { code: grpc.status.INVALID_ARGUMENT } }, 'a malformed request stays an error');
  });

  await t.test('audit: checks, denials with tenant state, explain', async (t) => {
    await ts.service.audit.flush();
    const rows = await ts.service.sql<{ event: string; outcome: string; tenant_id: string | null; details: any }[]>`
      select event, outcome, tenant_id, details from audit_log where event in ('authz.check', 'authz.explain') order by created_at`;
    t.ok(rows.some((r) => r.event === 'authz.check' && r.outcome === 'allow'), 'allowed checks written (SVC_AUTHZ_AUDIT_ALLOWED=all)');
    const frozen = rows.find((r) => r.details.reason === 'tenant is frozen');
    t.match(frozen, { outcome: 'deny', tenant_id: ids.icy, details: { tenant_status: 'frozen', action: 'read', object_kind: 'resource', object_id: ids.ich, resource_id: ids.ich } });
    t.ok(rows.some((r) => r.event === 'authz.explain'), 'explain calls are audited');
  });
});
