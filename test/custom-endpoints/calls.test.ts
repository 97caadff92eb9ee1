// Custom endpoint calls (SPEC.md "Custom endpoint calls", "Authentication" 9, the errors table): every
// refusal in the spec's order, who may call (execute or manage on the endpoint or its tenant scope, scoped
// token ceilings), caller_context against service_context, and the execution record each call leaves.
import t from 'tap';
import { ADMIN_ID, accessTokenFor, adminToken, insertEntity, insertTenant, makeTenantAdmin, startAuthService, tokenFor } from '../helpers/auth.js';
import { ok } from '../helpers/management.js';
import { waitUntil } from '../helpers/wait.js';
import { callEndpoint, createEndpoint, DISABLE, executionsOf, UPDATE } from './helpers.js';

const WHOAMI = 'query { whoami { entityId entityKind sessionId } }';

t.test('custom endpoint calls', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const tenantA = await insertTenant(ts, 'tenant-a');
  const tenantB = await insertTenant(ts, 'tenant-b');
  const adminA = await insertEntity(ts, { name: 'admin-a' });
  const adminB = await insertEntity(ts, { name: 'admin-b' });
  await makeTenantAdmin(ts, tenantA, adminA);
  await makeTenantAdmin(ts, tenantB, adminB);
  const tokenA = await tokenFor(ts, adminA);
  const tokenB = await tokenFor(ts, adminB);
  const plain = await insertEntity(ts, { name: 'plain-user' });
  const plainToken = await tokenFor(ts, plain);

  const platform = await createEndpoint(ts, { path: '/api/custom/whoami', graphql: WHOAMI });
  const tenantEndpoint = await createEndpoint(ts, { tenantId: tenantA, path: '/api/custom/a/whoami', graphql: WHOAMI, method: 'POST' });

  await t.test('404: no endpoint, a draft, a disabled one, another method', async (t) => {
    t.same(await callEndpoint(ts, '/api/custom/nothing-here', { token: admin }), { status: 404, body: { error: 'custom endpoint /api/custom/nothing-here not found' } });
    const draft = await createEndpoint(ts, { path: '/api/custom/draft', status: 'draft' });
    t.equal(draft.status, 'draft');
    t.same(await callEndpoint(ts, '/api/custom/draft', { token: admin }), { status: 404, body: { error: 'custom endpoint /api/custom/draft not found' } });
    const disabled = await createEndpoint(ts, { path: '/api/custom/disabled' });
    t.equal((await callEndpoint(ts, '/api/custom/disabled', { token: admin })).status, 200, 'callable while active');
    await ok(ts, admin, DISABLE, { id: disabled.id });
    t.same(await callEndpoint(ts, '/api/custom/disabled', { token: admin }), { status: 404, body: { error: 'custom endpoint /api/custom/disabled not found' } });
    t.equal((await callEndpoint(ts, '/api/custom/whoami', { token: admin, method: 'DELETE' })).status, 404, 'another method of an existing path');
    t.equal((await callEndpoint(ts, '/api/custom/nothing-here', {})).status, 404, 'lookup comes before authentication');
  });

  await t.test('401: no Authorization header, another scheme, an unusable token', async (t) => {
    t.same(await callEndpoint(ts, '/api/custom/whoami', {}), { status: 401, body: { error: 'missing Authorization header' } });
    t.same(await callEndpoint(ts, '/api/custom/whoami', { authorization: 'Basic YWRtaW46eA==' }), { status: 401, body: { error: 'expected Bearer token' } });
    t.equal((await callEndpoint(ts, '/api/custom/whoami', { authorization: 'Bearer not-a-token' })).status, 401);
    t.equal((await callEndpoint(ts, '/api/custom/whoami', { token: 'svc_00000000000000000000000000000000_' + '0'.repeat(64) })).status, 401);
  });

  await t.test('403: without execute or manage on the endpoint or its tenant scope', async (t) => {
    t.same(await callEndpoint(ts, '/api/custom/whoami', { token: plainToken }), { status: 403, body: { error: 'forbidden' } }, 'a user without grants');
    t.same(await callEndpoint(ts, '/api/custom/a/whoami', { token: tokenB, method: 'POST' }), { status: 403, body: { error: 'forbidden' } },
      "another tenant's administrator");
    t.equal((await callEndpoint(ts, '/api/custom/whoami', { token: tokenA })).status, 403, 'a tenant administrator on a platform endpoint');
    const own = await callEndpoint(ts, '/api/custom/a/whoami', { token: tokenA, method: 'POST' });
    t.same(own, { status: 200, body: { whoami: { entityId: adminA, entityKind: 'human', sessionId: own.body.whoami?.sessionId } } },
      "the tenant's own administrator (manage on the tenant scope)");
    t.ok(own.body.whoami.sessionId, 'caller_context: the operation runs as the caller, with the session');
  });

  await t.test('execute granted on the endpoint object alone', async (t) => {
    const actions = await ok(ts, admin, 'query { actions(limit: 100) { items { id name } } }');
    const execute = actions.actions.items.find((a: { name: string }) => a.name === 'execute').id;
    const block = await ok(ts, admin, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
      { i: { scopeMode: 'object', objectKind: 'api_endpoint', objectId: platform.id, actionIds: [execute] } });
    await ok(ts, admin, `mutation ($i: CreateDirectPolicyInput!) { createDirectPolicy(input: $i) { id } }`,
      { i: { subjectKind: 'entity', subjectId: plain, permissionBlockId: block.createPermissionBlock.id } });
    const res = await callEndpoint(ts, '/api/custom/whoami', { token: plainToken });
    t.equal(res.status, 200);
    t.equal(res.body.whoami.entityId, plain);
    t.equal((await callEndpoint(ts, '/api/custom/a/whoami', { token: plainToken, method: 'POST' })).status, 403, 'the grant covers that endpoint only');
  });

  await t.test('scoped access tokens: the ceiling applies to the action check and to the operation', async (t) => {
    const outside = await accessTokenFor(ts, tokenA, [{ actions: ['read'], scopeMode: 'tenant', tenantId: tenantA }]);
    t.same(await callEndpoint(ts, '/api/custom/a/whoami', { token: outside.token, method: 'POST' }), { status: 403, body: { error: 'forbidden' } },
      'a scoped token whose ceiling has neither execute nor manage');
    // The ceiling narrows what the holder has (manage on its tenant): manage on this one endpoint.
    const inside = await accessTokenFor(ts, tokenA, [{ actions: ['manage'], scopeMode: 'object', objectId: tenantEndpoint.id }]);
    const res = await callEndpoint(ts, '/api/custom/a/whoami', { token: inside.token, method: 'POST' });
    t.equal(res.status, 200, 'a ceiling holding manage on the endpoint');
    t.same(res.body.whoami, { entityId: adminA, entityKind: 'human', sessionId: null }, 'the token has no session');
    // The operation itself runs under the same ceiling: reading the tenant is outside it.
    const reader = await createEndpoint(ts, {
      tenantId: tenantA, path: '/api/custom/a/tenant', graphql: 'query ($id: ID!) { tenant(id: $id) { id name } }', variablesMapping: { id: tenantA },
    });
    t.equal((await callEndpoint(ts, '/api/custom/a/tenant', { token: tokenA })).status, 200, 'the tenant admin reads the tenant');
    const insideReader = await accessTokenFor(ts, tokenA, [{ actions: ['manage'], scopeMode: 'object', objectId: reader.id }]);
    t.same(await callEndpoint(ts, '/api/custom/a/tenant', { token: insideReader.token }), { status: 400, body: { error: 'GraphQL execution failed' } },
      'the token may call the endpoint, not read the tenant');
    const [record] = await executionsOf(ts, reader.id);
    t.equal(record.status, 'error');
    t.match(JSON.stringify(record.responseSummary.errors), /forbidden/, 'the reason is in the execution record only');
  });

  await t.test('service_context: runs as the service entity, refused when it or its tenant is not active', async (t) => {
    const service = await insertEntity(ts, { name: 'svc-a', kind: 'service', tenantId: tenantA });
    const runAs = await createEndpoint(ts, {
      tenantId: tenantA, path: '/api/custom/a/as-service', graphql: WHOAMI, authMode: 'service_context', serviceEntityId: service,
    });
    const res = await callEndpoint(ts, '/api/custom/a/as-service', { token: tokenA });
    t.same(res, { status: 200, body: { whoami: { entityId: service, entityKind: 'service', sessionId: null } } });
    await ts.service.sql`update entities set status = 'inactive' where id = ${service}`;
    t.same(await callEndpoint(ts, '/api/custom/a/as-service', { token: tokenA }), { status: 403, body: { error: 'forbidden' } }, 'inactive service entity');
    await ts.service.sql`update entities set status = 'active' where id = ${service}`;
    t.equal((await callEndpoint(ts, '/api/custom/a/as-service', { token: admin })).status, 200);
    await ts.service.sql`update entities set deleted_at = now() where id = ${service}`;
    t.equal((await callEndpoint(ts, '/api/custom/a/as-service', { token: admin })).status, 403, 'deleted service entity');
    await ts.service.sql`update entities set deleted_at = null where id = ${service}`;
    await ts.service.sql`update tenants set status = 'inactive' where id = ${tenantA}`;
    // The platform administrator may still call (its grant is platform-wide); the service's tenant is not active.
    t.same(await callEndpoint(ts, '/api/custom/a/as-service', { token: admin }), { status: 403, body: { error: 'forbidden' } }, "the service entity's tenant is inactive");
    await ts.service.sql`update tenants set status = 'active' where id = ${tenantA}`;
    t.equal((await callEndpoint(ts, '/api/custom/a/as-service', { token: admin })).status, 200);
    const platformService = await insertEntity(ts, { name: 'svc-platform', kind: 'service' });
    await ok(ts, admin, UPDATE, { id: runAs.id, i: { serviceEntityId: platformService } });
    t.equal((await callEndpoint(ts, '/api/custom/a/as-service', { token: admin })).body.whoami.entityId, platformService, 'a platform entity');
    const records = await executionsOf(ts, runAs.id);
    t.equal(records.filter((r) => r.status === 'denied' && r.error === 'forbidden').length, 3, 'each refusal is recorded as denied');
  });

  await t.test('400: requestSchema failures list the schema errors', async (t) => {
    await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/validated', graphql: 'query { health }',
      requestSchema: { type: 'object', required: ['name', 'count'], properties: { name: { type: 'string' }, count: { type: 'integer', minimum: 1 } } },
    });
    const res = await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', body: { name: 7, count: 0 } });
    t.equal(res.status, 400);
    t.equal(res.body.error, 'request body failed requestSchema validation: body/name must be string; body/count must be >= 1');
    const missing = await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', body: {} });
    t.equal(missing.body.error, "request body failed requestSchema validation: body must have required property 'name'; body must have required property 'count'");
    t.equal((await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', body: { name: 'x', count: 2 } })).status, 200);
  });

  await t.test('400: a body that is not JSON', async (t) => {
    const res = await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', rawBody: '{"name": ' });
    t.equal(res.status, 400);
    t.match(res.body.error, /^custom endpoint request body must be JSON: /);
  });

  await t.test('400: GraphQL errors, with the details only in the execution record', async (t) => {
    const failing = await createEndpoint(ts, { path: '/api/custom/entity', graphql: 'query ($id: ID!) { entity(id: $id) { id name } }', variablesMapping: { id: '$query.id' } });
    t.same(await callEndpoint(ts, '/api/custom/entity', { token: admin }), { status: 400, body: { error: 'GraphQL execution failed' } }, 'a required variable left out');
    t.same(await callEndpoint(ts, '/api/custom/entity', { token: admin, query: 'id=not-a-uuid' }), { status: 400, body: { error: 'GraphQL execution failed' } });
    const res = await callEndpoint(ts, '/api/custom/entity', { token: admin, query: `id=${ADMIN_ID}` });
    t.same(res, { status: 200, body: { entity: { id: ADMIN_ID, name: 'admin' } } });
    const records = await executionsOf(ts, failing.id);
    t.same(records.map((r) => r.status), ['success', 'error', 'error']);
    t.equal(records[1].error, 'GraphQL execution failed');
    t.match(records[1].responseSummary.errors[0].message, /id must be a UUID/);
    t.match(records[2].responseSummary.errors[0].message, /\$id/);
    t.same(records[0].requestSummary, { method: 'GET', path: '/api/custom/entity', variables: { id: ADMIN_ID } });
    t.same(records[0].responseSummary, { entity: { id: ADMIN_ID, name: 'admin' } });
    t.equal(records[0].callerEntityId, ADMIN_ID);
  });

  await t.test('413 for a body over the limit, only once lookup, authentication and the action check passed', async (t) => {
    const big = Buffer.alloc(1_048_577, 0x20);
    t.equal((await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', rawBody: big })).status, 413);
    t.equal((await callEndpoint(ts, '/api/custom/validated', { method: 'POST', rawBody: big })).status, 401, 'no token: 401, not 413');
    t.equal((await callEndpoint(ts, '/api/custom/missing', { token: admin, method: 'POST', rawBody: big })).status, 404, 'no endpoint: 404');
    t.equal((await callEndpoint(ts, '/api/custom/validated', { token: plainToken, method: 'POST', rawBody: big })).status, 403, 'no grant: 403');
    // Sent chunked (no Content-Length): measured while read.
    const chunked = new ReadableStream({
      start(c) {
        for (let i = 0; i < 17; i++) c.enqueue(new Uint8Array(65_536).fill(0x20));
        c.close();
      },
    });
    const res = await fetch(`${ts.url()}/api/custom/validated`, { method: 'POST', headers: { authorization: `Bearer ${admin}` }, body: chunked, duplex: 'half' } as RequestInit);
    t.equal(res.status, 413);
    t.equal((await callEndpoint(ts, '/api/custom/validated', { token: admin, method: 'POST', body: { name: 'x', count: 1 } })).status, 200, 'the next call is served');
  });

  await t.test('introspection stored behind the save checks is refused at execution', async (t) => {
    const operations = [
      'query { __schema { queryType { name } } }',
      'query { s: __schema { queryType { name } } }',
      'query { ...F } fragment F on Query { t: __type(name: "Query") { name } }',
      'query { ... on Query { __type(name: "Query") { name } } }',
      'query IntrospectionQuery { health }',
    ];
    for (const [i, graphql] of operations.entries()) {
      const path = `/api/custom/smuggled-${i}`;
      // Written past the service (as a restore or a manual fix could): the routing table still refuses it.
      const [row] = await ts.service.sql<{ id: string }[]>`
        insert into api_endpoints (key, name, method, path, operation_kind, graphql, status)
        values (${`smuggled_${i}`}, 'smuggled', 'GET', ${path}, 'query', ${graphql}, 'active') returning id`;
      await waitUntil(() => ts.service.customEndpoints.router.lookup('GET', path) !== undefined, 5000, 'the NOTIFY of the insert');
      const res = await callEndpoint(ts, path, { token: admin });
      t.equal(res.status, 400, graphql);
      t.equal(res.body.error, 'custom endpoint cannot run: graphql must not use introspection (__schema, __type, IntrospectionQuery)');
      const [record] = await executionsOf(ts, row!.id);
      t.equal(record.status, 'error');
    }
  });

  await t.test('every call of an endpoint leaves one record', async (t) => {
    const records = await executionsOf(ts, platform.id);
    const byStatus = (s: string) => records.filter((r) => r.status === s).length;
    t.ok(byStatus('success') >= 1 && byStatus('denied') >= 4, 'successes and refusals');
    const unauthenticated = records.find((r) => r.error === 'missing Authorization header');
    t.same(unauthenticated && { ...unauthenticated, id: undefined, createdAt: undefined }, {
      id: undefined, createdAt: undefined, endpointId: platform.id, callerEntityId: null, status: 'denied',
      requestSummary: { method: 'GET', path: '/api/custom/whoami', variables: null }, responseSummary: {}, error: 'missing Authorization header',
    });
    const [{ n }] = await ts.service.sql<[{ n: number }]>`select count(*)::int as n from api_endpoint_executions where endpoint_id is null`;
    t.equal(n, 0, 'requests that named no endpoint (missing, draft, disabled) leave no record');
  });
});

t.test('calls are counted in the custom_endpoints rate-limit category', async (t) => {
  const ts = await startAuthService(t, { SVC_RATE_LIMIT_ENABLED: 'true', SVC_HTTP_RATE_LIMIT_CUSTOM_ENDPOINTS: '3', SVC_HTTP_RATE_LIMIT_AUTH_ROUTES: '100' });
  const admin = await adminToken(ts);
  await createEndpoint(ts, { path: '/api/custom/limited' });
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await callEndpoint(ts, '/api/custom/limited', { token: admin })).status);
  t.same(statuses, [200, 200, 200]);
  const res = await fetch(`${ts.url()}/api/custom/limited`, { headers: { authorization: `Bearer ${admin}` } });
  t.equal(res.status, 429);
  t.same(await res.json(), { error: 'rate limit exceeded' });
  t.ok(Number(res.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal((await callEndpoint(ts, '/api/custom/unknown', { token: admin })).status, 429, 'unknown paths count too');
});
