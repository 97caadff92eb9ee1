// Custom endpoint management (SPEC.md management operations, "Authentication" 10): platform administrators
// only, every save rule with a message naming its field, introspection refused however it is written,
// states (draft by default, enable validates against the schema, disabled not editable), listings.
import t from 'tap';
import { accessTokenFor, adminToken, insertEntity, insertTenant, makeTenantAdmin, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { ok } from '../helpers/management.js';
import { CREATE, DISABLE, ENABLE, UPDATE, callEndpoint, createEndpoint, endpointInput, refusal } from './helpers.js';

t.test('custom endpoint management', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const tenantA = await insertTenant(ts, 'tenant-a');
  const tenantB = await insertTenant(ts, 'tenant-b');

  await t.test('platform administrators only: every operation refuses everyone else', async (t) => {
    const existing = await createEndpoint(ts, { tenantId: tenantA, status: 'draft' });
    const tenantAdmin = await insertEntity(ts, { name: 'tenant-admin' });
    await makeTenantAdmin(ts, tenantA, tenantAdmin);
    const user = await insertEntity(ts, { name: 'user' });
    const callers: [string, string | undefined, string][] = [
      ['a tenant administrator of the endpoint tenant', await tokenFor(ts, tenantAdmin), 'FORBIDDEN'],
      ['a user without grants', await tokenFor(ts, user), 'FORBIDDEN'],
      ["the administrator's own scoped token, even with platform manage", (await accessTokenFor(ts, admin, [{ actions: ['manage', 'read', 'execute'], scopeMode: 'platform' }])).token, 'FORBIDDEN'],
      ['no token', undefined, 'UNAUTHENTICATED'],
    ];
    const operations: [string, string, Record<string, unknown>][] = [
      ['apiEndpoints', 'query { apiEndpoints { total } }', {}],
      ['apiEndpoint', 'query ($id: ID!) { apiEndpoint(id: $id) { id } }', { id: existing.id }],
      ['apiEndpointExecutions', 'query ($id: ID!) { apiEndpointExecutions(endpointId: $id) { total } }', { id: existing.id }],
      ['createApiEndpoint', CREATE, { i: endpointInput({ tenantId: tenantA }) }],
      ['updateApiEndpoint', UPDATE, { id: existing.id, i: { name: 'taken over' } }],
      ['enableApiEndpoint', ENABLE, { id: existing.id }],
      ['disableApiEndpoint', DISABLE, { id: existing.id }],
    ];
    for (const [who, token, code] of callers) {
      for (const [name, query, variables] of operations) {
        const res = await gql(ts.url(), query, variables, token);
        t.equal(res.body.errors?.[0]?.extensions?.code, code, `${name} by ${who}`);
        if (code === 'FORBIDDEN') t.equal(res.body.errors?.[0]?.message, 'forbidden');
      }
    }
    const after = await ok(ts, admin, 'query ($id: ID!) { apiEndpoint(id: $id) { name status } }', { id: existing.id });
    t.same(after.apiEndpoint, { name: existing.name, status: 'draft' }, 'nothing changed');
  });

  await t.test('create: a draft unless a status is given; defaults; read-only fields', async (t) => {
    const res = await ok(ts, admin, CREATE, { i: endpointInput({ key: 'defaults', path: '/api/custom/defaults', description: 'd' }) });
    const e = res.createApiEndpoint;
    t.match(e, {
      tenantId: null, key: 'defaults', description: 'd', method: 'GET', path: '/api/custom/defaults', operationKind: 'query', authMode: 'caller_context',
      serviceEntityId: null, variablesMapping: {}, requestSchema: {}, responseMapping: {}, status: 'draft', createdBy: '00000000-0000-0000-0000-000000000001',
      updatedBy: '00000000-0000-0000-0000-000000000001', updatedAt: null,
    });
    t.ok(Date.parse(e.createdAt));
    await ts.service.audit.flush();
    const [audit] = await ts.service.sql<{ actor_entity_id: string; target_kind: string }[]>`
      select actor_entity_id, target_kind from audit_log where event = 'api_endpoint.create' and target_id = ${e.id}`;
    t.same(audit, { actor_entity_id: '00000000-0000-0000-0000-000000000001', target_kind: 'api_endpoint' }, 'audited');
    const lower = await ok(ts, admin, CREATE, { i: endpointInput({ method: 'post' }) });
    t.equal(lower.createApiEndpoint.method, 'POST', 'the method is stored as requests carry it');
    const one = await ok(ts, admin, 'query ($id: ID!) { apiEndpoint(id: $id) { id key } }', { id: e.id });
    t.same(one.apiEndpoint, { id: e.id, key: 'defaults' });
    t.same(await refusal(ts, 'query ($id: ID!) { apiEndpoint(id: $id) { id } }', { id: '7f0e3c3e-6a55-4b8e-9d7a-6f4f4b2f8a11' }),
      { message: 'api endpoint not found', code: 'NOT_FOUND' });
  });

  await t.test('every save rule names its field', async (t) => {
    const cases: [string, Record<string, unknown>, string | RegExp][] = [
      ['blank key', { key: ' ' }, "key must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"],
      ['no name', { name: '' }, 'name must be a non-empty string'],
      ['unknown method', { method: 'FETCH' }, 'method must be one of GET, POST, PUT, PATCH, DELETE'],
      ['path outside /api/custom/', { path: '/devices' }, 'path must start with /api/custom/'],
      ['path with //', { path: '/api/custom//x' }, 'path must not contain //'],
      ['path with ..', { path: '/api/custom/a/../b' }, 'path must not contain ..'],
      ['path with ?', { path: '/api/custom/a?b=1' }, 'path must not contain ?'],
      ['path with #', { path: '/api/custom/a#b' }, 'path must not contain #'],
      ['path with a blank', { path: '/api/custom/a b' }, 'path must not contain whitespace or control characters'],
      ['unknown operationKind', { operationKind: 'subscription' }, 'operationKind must be one of query, mutation'],
      ['kind not matching the text', { operationKind: 'mutation', graphql: 'query { health }' }, 'operationKind is mutation but graphql holds a query'],
      ['kind not matching the text (2)', { operationKind: 'query', graphql: 'mutation { logout }' }, 'operationKind is query but graphql holds a mutation'],
      ['text that does not parse', { graphql: 'query { health' }, /^graphql does not parse: Syntax Error/],
      ['empty text', { graphql: '' }, 'graphql must be a non-empty operation text'],
      ['two operations', { graphql: 'query A { health } query B { health }' }, 'graphql must contain exactly one operation; found 2'],
      ['fragments only', { graphql: 'fragment F on Query { health }' }, 'graphql must contain an operation, not only fragments'],
      ['an undefined fragment', { graphql: 'query { ...Missing }' }, 'graphql is incomplete: fragment Missing is not defined'],
      ['a subscription', { graphql: 'subscription { events }' }, 'graphql must be a query or a mutation; found a subscription'],
      ['type definitions', { graphql: 'query { health } type X { a: Int }' }, 'graphql must hold an executable operation, not type definitions'],
      ['unknown authMode', { authMode: 'root' }, 'authMode must be one of caller_context, service_context'],
      ['service_context without serviceEntityId', { authMode: 'service_context' }, 'serviceEntityId is required when authMode is service_context'],
      ['serviceEntityId with caller_context', { serviceEntityId: '00000000-0000-0000-0000-000000000003' }, 'serviceEntityId is only for authMode service_context'],
      ['serviceEntityId naming nothing', { authMode: 'service_context', serviceEntityId: '7f0e3c3e-6a55-4b8e-9d7a-6f4f4b2f8a11' }, 'serviceEntityId does not name an entity'],
      ['serviceEntityId not a UUID', { authMode: 'service_context', serviceEntityId: 'svc' }, 'serviceEntityId must be a UUID'],
      ['requestSchema not an object', { requestSchema: [1] }, 'requestSchema must be a JSON object'],
      ['requestSchema not a JSON Schema', { requestSchema: { type: 'nonsense' } }, /^requestSchema is not a valid JSON Schema: /],
      ['variablesMapping not an object', { variablesMapping: 'x' }, 'variablesMapping must be a JSON object'],
      ['an unknown source', { variablesMapping: { id: '$cookie.sid' } }, /^variablesMapping\.id has an unsupported source '\$cookie\.sid'; expected \$body/],
      ['an unknown $auth field', { variablesMapping: { id: '$auth.password' } }, /^variablesMapping\.id has an unsupported source '\$auth\.password'/],
      ['an empty source path', { variablesMapping: { id: '$body.' } }, /^variablesMapping\.id has an unsupported source '\$body\.'/],
      ['an empty key part', { variablesMapping: { 'input..name': '$body.name' } }, "variablesMapping key 'input..name' must be a name or dotted names (input.name)"],
      ['overlapping keys', { variablesMapping: { input: '$body', 'input.name': '$body.name' } }, "variablesMapping keys 'input.name' and 'input' overlap"],
      ['a prototype key', { variablesMapping: { '__proto__.x': 1 } }, "variablesMapping key '__proto__.x' uses a reserved name"],
      ['responseMapping not an object', { responseMapping: [] }, 'responseMapping must be a JSON object'],
      ['an empty response path', { responseMapping: { id: '$.' } }, "responseMapping.id path '$.' must be $.<field> or $.<field>.<field>..."],
      ['unknown status', { status: 'paused' }, 'status must be one of draft, active, disabled'],
      ['tenantId naming nothing', { tenantId: '7f0e3c3e-6a55-4b8e-9d7a-6f4f4b2f8a11' }, 'tenantId does not name a live tenant'],
      ['active, not valid against the schema', { status: 'active', graphql: 'query { nothingLikeThis }' }, 'graphql does not validate against the schema: Cannot query field "nothingLikeThis" on type "Query".'],
    ];
    for (const [why, over, message] of cases) {
      const r = await refusal(ts, CREATE, { i: endpointInput(over) });
      if (typeof message === 'string') t.equal(r.message, message, why);
      else t.match(r.message, message, why);
      t.equal(r.code, 'BAD_REQUEST', why);
    }
    const [{ n }] = await ts.service.sql<[{ n: number }]>`select count(*)::int as n from api_endpoints where path in ('/devices', '/api/custom/a b')`;
    t.equal(n, 0, 'nothing refused was stored');
    const draft = await ok(ts, admin, CREATE, { i: endpointInput({ graphql: 'query { nothingLikeThis }' }) });
    t.equal(draft.createApiEndpoint.status, 'draft', 'a draft needs only parse: the schema is checked when it is enabled');
  });

  await t.test('introspection is refused at save, however it is written', async (t) => {
    const smuggled: [string, string][] = [
      ['plain', 'query { __schema { types { name } } }'],
      ['behind an alias', 'query { health schema: __schema { queryType { name } } }'],
      ['__type behind an alias', 'query { t: __type(name: "Query") { name } }'],
      ['in a fragment', 'query Q { ...Inspect } fragment Inspect on Query { __schema { types { name } } }'],
      ['in a nested fragment', 'query { ...A } fragment A on Query { ...B } fragment B on Query { x: __type(name: "Tenant") { fields { name } } }'],
      ['in an inline fragment', 'query { ... on Query { __schema { directives { name } } } }'],
      ['named IntrospectionQuery', 'query IntrospectionQuery { health }'],
      ['in a mutation', 'mutation { logout s: __schema { queryType { name } } }'],
    ];
    for (const [why, graphql] of smuggled) {
      const kind = graphql.startsWith('mutation') ? 'mutation' : 'query';
      t.equal((await refusal(ts, CREATE, { i: endpointInput({ graphql, operationKind: kind }) })).message,
        'graphql must not use introspection (__schema, __type, IntrospectionQuery)', why);
    }
    const e = await createEndpoint(ts, { status: 'draft' });
    t.equal((await refusal(ts, UPDATE, { id: e.id, i: { graphql: 'query { a: __type(name: "Query") { name } }' } })).message,
      'graphql must not use introspection (__schema, __type, IntrospectionQuery)', 'on update too');
    const typename = await createEndpoint(ts, { graphql: 'query { __typename health }' });
    t.equal(typename.status, 'active', '__typename is not introspection');
  });

  await t.test('unique key per tenant and among platform endpoints; one active endpoint per method and path', async (t) => {
    await createEndpoint(ts, { key: 'shared_key', path: '/api/custom/k1', status: 'draft' });
    t.same(await refusal(ts, CREATE, { i: endpointInput({ key: 'shared_key' }) }), { message: 'an endpoint with this key already exists', code: 'CONFLICT' });
    await createEndpoint(ts, { key: 'shared_key', tenantId: tenantA, status: 'draft' });
    await createEndpoint(ts, { key: 'shared_key', tenantId: tenantB, status: 'draft' });
    t.same(await refusal(ts, CREATE, { i: endpointInput({ key: 'shared_key', tenantId: tenantA }) }), { message: 'an endpoint with this key already exists', code: 'CONFLICT' });

    const first = await createEndpoint(ts, { method: 'POST', path: '/api/custom/same' });
    t.same(await refusal(ts, CREATE, { i: endpointInput({ method: 'POST', path: '/api/custom/same', status: 'active' }) }),
      { message: 'an active endpoint already serves this method and path', code: 'CONFLICT' });
    const second = await createEndpoint(ts, { method: 'POST', path: '/api/custom/same', status: 'draft' });
    await createEndpoint(ts, { method: 'GET', path: '/api/custom/same' });
    t.same(await refusal(ts, ENABLE, { id: second.id }), { message: 'an active endpoint already serves this method and path', code: 'CONFLICT' });
    await ok(ts, admin, DISABLE, { id: first.id });
    t.same((await ok(ts, admin, ENABLE, { id: second.id })).enableApiEndpoint, { id: second.id, status: 'active' }, 'free once the other is disabled');
    t.equal((await callEndpoint(ts, '/api/custom/same', { method: 'POST', token: admin })).status, 200);
  });

  await t.test('states: enable validates against the schema; a disabled endpoint is not editable until re-enabled', async (t) => {
    const e = await createEndpoint(ts, { status: 'draft', path: '/api/custom/states', graphql: 'query { nothingLikeThis }' });
    t.match((await refusal(ts, ENABLE, { id: e.id })).message, /^graphql does not validate against the schema: Cannot query field "nothingLikeThis"/);
    t.equal((await ok(ts, admin, 'query ($id: ID!) { apiEndpoint(id: $id) { status } }', { id: e.id })).apiEndpoint.status, 'draft', 'still a draft');
    const fixed = await ok(ts, admin, UPDATE, { id: e.id, i: { graphql: 'query { health }' } });
    t.equal(fixed.updateApiEndpoint.graphql, 'query { health }');
    t.equal(fixed.updateApiEndpoint.updatedBy, '00000000-0000-0000-0000-000000000001');
    t.ok(fixed.updateApiEndpoint.updatedAt);
    t.same((await ok(ts, admin, ENABLE, { id: e.id })).enableApiEndpoint, { id: e.id, status: 'active' });
    t.same((await ok(ts, admin, ENABLE, { id: e.id })).enableApiEndpoint, { id: e.id, status: 'active' }, 'enabling an active endpoint changes nothing');
    t.match((await refusal(ts, UPDATE, { id: e.id, i: { graphql: 'query { nothingLikeThis }' } })).message,
      /^graphql does not validate against the schema/, 'an active endpoint stays valid against the schema');
    t.same((await ok(ts, admin, DISABLE, { id: e.id })).disableApiEndpoint, { id: e.id, status: 'disabled' });
    t.same(await refusal(ts, UPDATE, { id: e.id, i: { name: 'renamed' } }),
      { message: 'a disabled endpoint cannot be edited until it is re-enabled (enableApiEndpoint)', code: 'BAD_REQUEST' });
    t.same((await ok(ts, admin, ENABLE, { id: e.id })).enableApiEndpoint, { id: e.id, status: 'active' });
    const renamed = await ok(ts, admin, UPDATE, { id: e.id, i: { name: 'renamed', status: 'draft' } });
    t.match(renamed.updateApiEndpoint, { name: 'renamed', status: 'draft', path: '/api/custom/states' }, 'omitted fields keep their values');
    t.equal((await callEndpoint(ts, '/api/custom/states', { token: admin })).status, 404, 'back to draft: no longer callable');
    // Switching to caller_context drops the stored service entity.
    const service = await insertEntity(ts, { name: 'svc', kind: 'service' });
    const sc = await createEndpoint(ts, { status: 'draft', authMode: 'service_context', serviceEntityId: service });
    const back = await ok(ts, admin, UPDATE, { id: sc.id, i: { authMode: 'caller_context' } });
    t.match(back.updateApiEndpoint, { authMode: 'caller_context', serviceEntityId: null });
    t.equal((await refusal(ts, UPDATE, { id: sc.id, i: { authMode: 'service_context' } })).message, 'serviceEntityId is required when authMode is service_context');
    t.same(await refusal(ts, UPDATE, { id: '7f0e3c3e-6a55-4b8e-9d7a-6f4f4b2f8a11', i: { name: 'x' } }), { message: 'api endpoint not found', code: 'NOT_FOUND' });
  });

  await t.test('listings: filters, then the page; executions newest first', async (t) => {
    const all = (await ok(ts, admin, 'query { apiEndpoints(limit: 100) { total items { id tenantId status } } }')).apiEndpoints;
    t.equal(all.items.length, all.total);
    const inA = (await ok(ts, admin, 'query ($t: ID!) { apiEndpoints(tenantId: $t) { total items { tenantId } } }', { t: tenantA })).apiEndpoints;
    t.ok(inA.total >= 2 && inA.items.every((e: { tenantId: string }) => e.tenantId === tenantA));
    const drafts = (await ok(ts, admin, 'query { apiEndpoints(status: "draft", limit: 100) { total items { status } } }')).apiEndpoints;
    t.equal(drafts.total, all.items.filter((e: { status: string }) => e.status === 'draft').length);
    const page = (await ok(ts, admin, 'query { apiEndpoints(limit: 2, offset: 1) { total items { id } } }')).apiEndpoints;
    t.equal(page.total, all.total, 'the total counts every match, not the page');
    t.same(page.items.map((e: { id: string }) => e.id), all.items.slice(1, 3).map((e: { id: string }) => e.id));
    t.equal((await refusal(ts, 'query { apiEndpoints(status: "paused") { total } }', {})).message, 'status must be one of draft, active, disabled');
    const e = await createEndpoint(ts, { path: '/api/custom/counted' });
    for (let i = 0; i < 3; i++) await callEndpoint(ts, '/api/custom/counted', { token: admin });
    await ts.service.customEndpoints.executions.flush();
    const ex = (await ok(ts, admin, 'query ($id: ID!) { apiEndpointExecutions(endpointId: $id, limit: 2) { total items { createdAt status } } }', { id: e.id })).apiEndpointExecutions;
    t.equal(ex.total, 3);
    t.equal(ex.items.length, 2);
    t.ok(ex.items[0].createdAt >= ex.items[1].createdAt, 'newest first');
  });
});
