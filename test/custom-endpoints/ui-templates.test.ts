// The endpoint templates the upstream admin UI offers (its Endpoints page, "create from a template"):
// saved the way the UI saves them (every field, as a draft), enabled, then called as its "Test endpoint"
// panel calls them. Each runs unchanged where the operation it calls exists in this schema; the two whose
// operations do not exist here (updatePolicy, explain) save as drafts and are refused when enabled.
import t from 'tap';
import { adminToken, insertEntity, startAuthService } from '../helpers/auth.js';
import { ok } from '../helpers/management.js';
import { CREATE, ENABLE, callEndpoint, refusal } from './helpers.js';

interface Template {
  key: string;
  method: string;
  path: string;
  kind: 'query' | 'mutation';
  graphql: string;
  variables: Record<string, string>;
  schema: Record<string, unknown>;
}

const str = { type: 'string' };
const obj = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', ...(required.length ? { required } : {}), properties });
const TEMPLATES: Template[] = [
  { key: 'health_check', method: 'GET', path: '/api/custom/health', kind: 'query', graphql: 'query HealthCheck {\n  health\n}', variables: {}, schema: {} },
  {
    key: 'create_tenant', method: 'POST', path: '/api/custom/tenants', kind: 'mutation',
    graphql: 'mutation CreateTenant($input: CreateTenantInput!) {\n  createTenant(input: $input) {\n    id\n    name\n    alias\n    status\n    createdAt\n  }\n}',
    variables: { 'input.name': '$body.name', 'input.alias': '$body.alias' }, schema: obj({ name: str, alias: str }, ['name']),
  },
  {
    key: 'update_tenant', method: 'PATCH', path: '/api/custom/tenants/update', kind: 'mutation',
    graphql: 'mutation UpdateTenant($id: ID!, $input: UpdateTenantInput!) {\n  updateTenant(id: $id, input: $input) {\n    id\n    name\n    alias\n    status\n    updatedAt\n  }\n}',
    variables: { id: '$query.id', 'input.name': '$body.name', 'input.alias': '$body.alias' }, schema: obj({ name: str, alias: str }),
  },
  {
    key: 'create_entity', method: 'POST', path: '/api/custom/entities', kind: 'mutation',
    graphql: 'mutation CreateEntity($input: CreateEntityInput!) {\n  createEntity(input: $input) {\n    id\n    name\n    alias\n    kind\n    status\n    createdAt\n  }\n}',
    variables: { 'input.name': '$body.name', 'input.alias': '$body.alias', 'input.kind': '$body.kind', 'input.tenantId': '$body.tenantId' },
    schema: obj({ name: str, alias: str, kind: str, tenantId: str }, ['name']),
  },
  {
    key: 'update_entity', method: 'PATCH', path: '/api/custom/entities/update', kind: 'mutation',
    graphql: 'mutation UpdateEntity($id: ID!, $input: UpdateEntityInput!) {\n  updateEntity(id: $id, input: $input) {\n    id\n    name\n    alias\n    kind\n    status\n    updatedAt\n  }\n}',
    variables: { id: '$query.id', 'input.name': '$body.name', 'input.alias': '$body.alias', 'input.attributes': '$body.attributes' },
    schema: obj({ name: str, alias: { type: ['string', 'null'] }, attributes: { type: 'object' } }),
  },
  {
    key: 'create_resource', method: 'POST', path: '/api/custom/resources', kind: 'mutation',
    graphql: 'mutation CreateResource($input: CreateResourceInput!) {\n  createResource(input: $input) {\n    id\n    name\n    alias\n    kind\n    createdAt\n  }\n}',
    variables: { 'input.name': '$body.name', 'input.alias': '$body.alias', 'input.kind': '$body.kind', 'input.tenantId': '$body.tenantId' },
    schema: obj({ name: str, alias: str, kind: str, tenantId: str }, ['name']),
  },
  {
    key: 'update_resource', method: 'PATCH', path: '/api/custom/resources/update', kind: 'mutation',
    graphql: 'mutation UpdateResource($id: ID!, $input: UpdateResourceInput!) {\n  updateResource(id: $id, input: $input) {\n    id\n    name\n    alias\n    kind\n    updatedAt\n  }\n}',
    variables: { id: '$query.id', 'input.name': '$body.name', 'input.alias': '$body.alias', 'input.attributes': '$body.attributes' },
    schema: obj({ name: str, alias: { type: ['string', 'null'] }, attributes: { type: 'object' } }),
  },
  {
    key: 'create_direct_policy', method: 'POST', path: '/api/custom/direct-policies', kind: 'mutation',
    graphql: 'mutation CreateDirectPolicy($input: CreateDirectPolicyInput!) {\n  createDirectPolicy(input: $input) {\n    id\n    tenantId\n    subjectKind\n    subjectId\n    permissionBlockId\n    createdAt\n  }\n}',
    variables: { 'input.tenantId': '$body.tenantId', 'input.subjectKind': '$body.subjectKind', 'input.subjectId': '$body.subjectId', 'input.permissionBlockId': '$body.permissionBlockId' },
    schema: obj({ effect: str, actions: { type: 'array', items: str }, entityId: str, resourceId: str }, ['effect', 'actions']),
  },
  {
    key: 'update_policy', method: 'PATCH', path: '/api/custom/policies/update', kind: 'mutation',
    graphql: 'mutation UpdatePolicy($id: ID!, $input: UpdatePolicyInput!) {\n  updatePolicy(id: $id, input: $input) {\n    id\n    effect\n    actions\n    status\n    updatedAt\n  }\n}',
    variables: { id: '$query.id', 'input.effect': '$body.effect', 'input.actions': '$body.actions' }, schema: obj({ effect: str, actions: { type: 'array', items: str } }),
  },
  {
    key: 'authz_check', method: 'POST', path: '/api/custom/authz/check', kind: 'query',
    graphql: 'query AuthzCheck($entityId: ID!, $action: String!, $resourceId: ID) {\n  explain(entityId: $entityId, action: $action, resourceId: $resourceId) {\n    decision\n    reason\n  }\n}',
    variables: { entityId: '$body.entityId', action: '$body.action', resourceId: '$body.resourceId' },
    schema: obj({ entityId: str, action: str, resourceId: str }, ['entityId', 'action']),
  },
];

t.test('the admin UI templates save, enable and run', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const saved = new Map<string, string>();
  for (const tpl of TEMPLATES) {
    // As the UI's form submits: every field, mappings parsed from its JSON text, status draft.
    const res = await ok(ts, admin, CREATE, {
      i: {
        key: tpl.key, name: tpl.key.replace(/_/g, ' '), description: `template ${tpl.key}`, method: tpl.method, path: tpl.path,
        operationKind: tpl.kind, graphql: tpl.graphql, authMode: 'caller_context', variablesMapping: tpl.variables, requestSchema: tpl.schema,
        responseMapping: {}, status: 'draft',
      },
    });
    t.equal(res.createApiEndpoint.status, 'draft', `${tpl.key} saved`);
    saved.set(tpl.key, res.createApiEndpoint.id);
  }
  t.match((await refusal(ts, ENABLE, { id: saved.get('update_policy') })).message,
    /^graphql does not validate against the schema: (Cannot query field|Unknown type)/, 'update_policy: its operation does not exist here');
  for (const tpl of TEMPLATES.filter((x) => x.key !== 'update_policy')) {
    t.same((await ok(ts, admin, ENABLE, { id: saved.get(tpl.key) })).enableApiEndpoint.status, 'active', `${tpl.key} enabled`);
  }

  const call = (path: string, method: string, body?: unknown, query?: string) => callEndpoint(ts, path, { token: admin, method, body, query });
  t.same(await call('/api/custom/health', 'GET'), { status: 200, body: { health: 'ok' } });

  const tenant = await call('/api/custom/tenants', 'POST', { name: 'Acme', alias: 'acme' });
  t.equal(tenant.status, 200);
  t.match(tenant.body.createTenant, { name: 'Acme', alias: 'acme', status: 'active' });
  const tenantId = tenant.body.createTenant.id;
  t.equal((await call('/api/custom/tenants', 'POST', { alias: 'no-name' })).body.error,
    "request body failed requestSchema validation: body must have required property 'name'");

  const renamed = await call('/api/custom/tenants/update', 'PATCH', { name: 'Acme Corp' }, `id=${tenantId}`);
  t.match(renamed, { status: 200, body: { updateTenant: { id: tenantId, name: 'Acme Corp', alias: 'acme' } } });

  const entity = await call('/api/custom/entities', 'POST', { name: 'meter-1', kind: 'device', tenantId });
  t.match(entity, { status: 200, body: { createEntity: { name: 'meter-1', kind: 'device', status: 'active' } } });
  const entityId = entity.body.createEntity.id;
  const updatedEntity = await call('/api/custom/entities/update', 'PATCH', { name: 'meter-1b', attributes: { floor: 3 } }, `id=${entityId}`);
  t.match(updatedEntity, { status: 200, body: { updateEntity: { id: entityId, name: 'meter-1b' } } });

  const resource = await call('/api/custom/resources', 'POST', { name: 'telemetry', kind: 'channel', tenantId });
  t.match(resource, { status: 200, body: { createResource: { name: 'telemetry', kind: 'channel' } } });
  const resourceId = resource.body.createResource.id;
  t.match(await call('/api/custom/resources/update', 'PATCH', { name: 'telemetry-2' }, `id=${resourceId}`),
    { status: 200, body: { updateResource: { id: resourceId, name: 'telemetry-2' } } });

  const actions = await ok(ts, admin, 'query { actions(limit: 100) { items { id name } } }');
  const read = actions.actions.items.find((a: { name: string }) => a.name === 'read').id;
  const block = await ok(ts, admin, `mutation ($i: CreatePermissionBlockInput!) { createPermissionBlock(input: $i) { id } }`,
    { i: { tenantId, scopeMode: 'tenant', actionIds: [read] } });
  const subject = await insertEntity(ts, { name: 'reader', kind: 'service', tenantId });
  const policy = await call('/api/custom/direct-policies', 'POST', {
    effect: 'allow', actions: ['read'], tenantId, subjectKind: 'entity', subjectId: subject, permissionBlockId: block.createPermissionBlock.id,
  });
  t.match(policy, { status: 200, body: { createDirectPolicy: { tenantId, subjectKind: 'entity', subjectId: subject } } });

  // authz_check runs explain under the caller: the grant just made decides it, and a reason comes back.
  t.match(await call('/api/custom/authz/check', 'POST', { entityId: subject, action: 'read', resourceId }),
    { status: 200, body: { explain: { decision: 'allow', reason: String } } });
  t.match(await call('/api/custom/authz/check', 'POST', { entityId: subject, action: 'delete', resourceId }),
    { status: 200, body: { explain: { decision: 'deny' } } });
});
