// variablesMapping and responseMapping (SPEC.md "Custom endpoint calls"): every rule, one case each, on
// the compiled plans; then the same rules end to end through real calls.
import t from 'tap';
import { buildVariables, compileResponse, compileVariables, shapeResponse, type MappingInput } from '../../src/custom-endpoints/mapping.js';
import { ADMIN_ID, accessTokenFor, adminToken, insertTenant, login, ADMIN_SECRET, startAuthService } from '../helpers/auth.js';
import { callEndpoint, createEndpoint, executionsOf } from './helpers.js';

const input = (over: Partial<MappingInput> = {}): MappingInput => ({
  body: { name: 'dev-1', meta: { site: { room: 'r7' } }, tags: ['a', 'b'], zero: 0, off: false, nothing: null },
  query: 'id=42&id=43&q=hello%20world',
  headers: { 'x-device-kind': 'sensor', authorization: 'Bearer t' },
  auth: { entityId: 'e-1', tenantId: 't-1', sessionId: 's-1' },
  path: '/api/custom/devices',
  ...over,
});
const vars = (mapping: Record<string, unknown>, over: Partial<MappingInput> = {}) => buildVariables(compileVariables(mapping), input(over));

t.test('variablesMapping rules', async (t) => {
  t.same(vars({ 'input.name': '$body.name', 'input.site.room': '$body.meta.site.room' }), { input: { name: 'dev-1', site: { room: 'r7' } } },
    'dotted keys build nesting');
  t.same(vars({ input: { name: '$body.name', n: 1 } }), { input: { name: '$body.name', n: 1 } }, 'a nested object value is taken as it is, not interpolated');
  t.same(vars({ all: '$body' }), { all: input().body }, '$body is the whole body');
  t.same(vars({ room: '$body.meta.site.room', second: '$body.tags.1', zero: '$body.zero', off: '$body.off', nothing: '$body.nothing' }),
    { room: 'r7', second: 'b', zero: 0, off: false, nothing: null }, '$body.<path> picks by field and index; falsy values are values');
  t.same(vars({ id: '$query.id', q: '$query.q' }), { id: '42', q: 'hello world' }, '$query.<name>: the first value, decoded');
  t.same(vars({ kind: '$headers.X-Device-Kind' }), { kind: 'sensor' }, '$headers.<name>, in any case');
  t.same(vars({ me: '$auth.entityId', tenant: '$auth.tenantId', session: '$auth.sessionId' }), { me: 'e-1', tenant: 't-1', session: 's-1' }, '$auth.*');
  t.same(vars({ me: '$auth.entityId', tenant: '$auth.tenantId', session: '$auth.sessionId' }, { auth: { entityId: 'e-1', tenantId: null, sessionId: null } }),
    { me: 'e-1' }, '$auth.tenantId absent at platform level, $auth.sessionId absent with an API key');
  t.same(vars({ p: '$path' }), { p: '/api/custom/devices' }, '$path');
  t.same(vars({ kind: 'device', n: 3, flag: true, none: null, price: '$5', list: [1, '$body.name'] }),
    { kind: 'device', n: 3, flag: true, none: null, price: '$5', list: [1, '$body.name'] }, 'anything else is a literal');
  t.same(vars({}), input().body, '{} forwards the whole body as the variables');
  t.throws(() => vars({}, { body: [1, 2] }), { message: 'custom endpoint request body must be a JSON object: the endpoint forwards it as the GraphQL variables' });
  const omitted = vars({ a: '$body.missing', 'b.c': '$body.meta.nope.deeper', d: '$query.absent', e: '$headers.x-absent', f: '$body.tags.9', g: '$body.name' });
  t.same(omitted, { g: 'dev-1' }, 'a source that resolves to nothing omits its variable');
  t.notOk('a' in omitted || 'b' in omitted, 'omitted, not null (and no empty parent object)');
  t.same(vars({ x: '$body.__proto__.polluted', y: '$body.constructor' }), {}, 'only own fields of the body are picked');
});

t.test('responseMapping rules', async (t) => {
  const data = { entity: { id: 'e-1', name: 'dev', owner: { id: 'o-1' } }, count: 0 };
  const shape = (mapping: Record<string, unknown>) => shapeResponse(compileResponse(mapping), data);
  t.same(shape({ ownerId: '$.entity.owner.id' }), { ownerId: 'o-1' }, '$.a.b picks data.a.b');
  t.same(shape({ device: '$.entity' }), { device: data.entity }, '$.a picks the whole data.a');
  t.same(shape({ kind: 'device', version: 2, price: '$5', raw: { a: '$.entity' } }), { kind: 'device', version: 2, price: '$5', raw: { a: '$.entity' } },
    'strings without $. (and other values) are literals');
  t.same(shape({ missing: '$.entity.nope', deeper: '$.nothing.at.all', count: '$.count' }), { missing: null, deeper: null, count: 0 }, 'a missing path yields null');
  t.same(shape({}), data, '{} returns the full data object');
});

t.test('mapping rules end to end', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  await createEndpoint(ts, {
    path: '/api/custom/entity', graphql: 'query ($id: ID!) { entity(id: $id) { id name kind } }',
    variablesMapping: { id: '$query.id' },
    responseMapping: { entityId: '$.entity.id', entity: '$.entity', source: 'custom', missing: '$.entity.nope' },
  });
  t.same(await callEndpoint(ts, '/api/custom/entity', { token: admin, query: `id=${ADMIN_ID}` }), {
    status: 200,
    body: { entityId: ADMIN_ID, entity: { id: ADMIN_ID, name: 'admin', kind: 'human' }, source: 'custom', missing: null },
  }, '$query into a variable; $.a.b, $.a, a literal and a missing path in the response');

  await createEndpoint(ts, { path: '/api/custom/by-header', graphql: 'query ($id: ID!) { entity(id: $id) { id } }', variablesMapping: { id: '$headers.X-Entity-Id' } });
  t.same((await callEndpoint(ts, '/api/custom/by-header', { token: admin, headers: { 'x-entity-id': ADMIN_ID } })).body, { entity: { id: ADMIN_ID } }, '$headers');

  await createEndpoint(ts, { path: '/api/custom/me', graphql: 'query ($id: ID!) { entity(id: $id) { id } }', variablesMapping: { id: '$auth.entityId' } });
  t.same((await callEndpoint(ts, '/api/custom/me', { token: admin })).body, { entity: { id: ADMIN_ID } }, '$auth.entityId');

  const session = await createEndpoint(ts, {
    path: '/api/custom/session', graphql: 'query ($id: ID!) { session(id: $id) { entityId } }', variablesMapping: { id: '$auth.sessionId' }, responseMapping: { data: '$.session' },
  });
  t.same((await callEndpoint(ts, '/api/custom/session', { token: admin })).body, { data: { entityId: ADMIN_ID } }, '$auth.sessionId with a session');
  const apiKey = await accessTokenFor(ts, admin);
  t.same(await callEndpoint(ts, '/api/custom/session', { token: apiKey.token }), { status: 400, body: { error: 'GraphQL execution failed' } },
    'with an API key there is no session: the variable is omitted, and the operation needs it');
  const [failed] = await executionsOf(ts, session.id);
  t.same(failed.requestSummary.variables, {}, 'omitted, not null');

  const tenant = await insertTenant(ts, 'shop');
  const inTenant = await login(ts, 'admin', ADMIN_SECRET, { tenantId: tenant });
  await createEndpoint(ts, { path: '/api/custom/my-tenant', graphql: 'query ($id: ID!) { tenant(id: $id) { id } }', variablesMapping: { id: '$auth.tenantId' } });
  t.same((await callEndpoint(ts, '/api/custom/my-tenant', { token: inTenant.token })).body, { tenant: { id: tenant } }, '$auth.tenantId in a tenant session');
  t.equal((await callEndpoint(ts, '/api/custom/my-tenant', { token: admin })).status, 400, 'absent at platform level');

  // $body paths, dotted targets, $path and literals, on a mutation that echoes what it was given.
  await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/devices', operationKind: 'mutation',
    graphql: 'mutation ($input: CreateEntityInput!) { createEntity(input: $input) { name kind tenantId attributes } }',
    variablesMapping: { 'input.name': '$body.device.name', 'input.kind': 'device', 'input.tenantId': '$body.tenant', 'input.attributes.route': '$path', 'input.attributes.site': '$body.site' },
    responseMapping: { created: '$.createEntity' },
  });
  const created = await callEndpoint(ts, '/api/custom/devices', { token: admin, method: 'POST', body: { device: { name: 'meter-7' }, tenant } });
  t.same(created, { status: 200, body: { created: { name: 'meter-7', kind: 'device', tenantId: tenant, attributes: { route: '/api/custom/devices' } } } },
    'absent $body.site left out of the nested input');

  await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/forward', operationKind: 'mutation',
    graphql: 'mutation ($input: CreateEntityInput!) { createEntity(input: $input) { name kind } }',
  });
  t.same((await callEndpoint(ts, '/api/custom/forward', { token: admin, method: 'POST', body: { input: { name: 'fwd', kind: 'device', tenantId: tenant } } })).body,
    { createEntity: { name: 'fwd', kind: 'device' } }, '{} forwards the body; {} response returns data unchanged');
  t.same(await callEndpoint(ts, '/api/custom/forward', { token: admin, method: 'POST', body: ['not', 'an', 'object'] }), {
    status: 400, body: { error: 'custom endpoint request body must be a JSON object: the endpoint forwards it as the GraphQL variables' },
  });
});
