// Owns the authorization benchmark's policy set: one deterministic "realistic" world (10k entities, 1k
// channels, nested object groups, 100 roles, 20k blocks, some conditions and denies), seeded into
// PostgreSQL for our engine and expressed for the peers (Cedar policies + entity slices, casbin RBAC
// with domains), plus the request mix every engine answers.
import { randomBytes, randomUUID } from 'node:crypto';
import postgres from 'postgres';

export const SIZES = { tenants: 10, entitiesPerTenant: 1000, channelsPerTenant: 100, rolesPerTenant: 10, blocksPerRole: 200, requests: 10_000 };

/** mulberry32: the same world every run. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Plain data: tenants, entities, channels, groups, roles with blocks, assignments, requests. */
export function buildWorld() {
  const rand = prng(20260101);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const tenants = [];
  const entities = [];
  const channels = [];
  const groups = [];
  const roles = [];
  const assignments = [];
  for (let t = 0; t < SIZES.tenants; t++) {
    const tenant = { id: randomUUID(), name: `bench-tenant-${t}` };
    tenants.push(tenant);
    // 5 roots x 2 children x 2 grandchildren: three levels of nesting; channels live in the leaves.
    const roots = [];
    const leaves = [];
    const mids = [];
    for (let r = 0; r < 5; r++) {
      const root = { id: randomUUID(), tenantId: tenant.id, parentId: null };
      groups.push(root);
      roots.push(root);
      for (let c = 0; c < 2; c++) {
        const mid = { id: randomUUID(), tenantId: tenant.id, parentId: root.id };
        groups.push(mid);
        mids.push(mid);
        for (let g = 0; g < 2; g++) {
          const leaf = { id: randomUUID(), tenantId: tenant.id, parentId: mid.id };
          groups.push(leaf);
          leaves.push(leaf);
        }
      }
    }
    const tenantChannels = [];
    for (let c = 0; c < SIZES.channelsPerTenant; c++) {
      const ch = { id: randomUUID(), tenantId: tenant.id, groupId: pick(leaves).id, zone: pick(['a', 'b', 'c']), priority: Math.floor(rand() * 10) };
      channels.push(ch);
      tenantChannels.push(ch);
    }
    const tenantRoles = [];
    for (let r = 0; r < SIZES.rolesPerTenant; r++) {
      const role = { id: randomUUID(), name: `role-${t}-${r}`, tenantId: tenant.id, blocks: [] };
      for (let b = 0; b < SIZES.blocksPerRole; b++) {
        const block = { id: randomUUID(), tenantId: tenant.id, effect: 'allow', conditions: null };
        if (b < 170) Object.assign(block, { scope: 'object', objectId: pick(tenantChannels).id, actions: ['publish', 'subscribe'] });
        else if (b < 185) Object.assign(block, { scope: 'group_descendant_objects', groupId: pick([...roots, ...mids]).id, actions: ['read'] });
        else if (b < 190) Object.assign(block, { scope: 'object_type', actions: ['read'], conditions: { 'resource.attributes.zone': 'a' } });
        else if (b < 195) Object.assign(block, { scope: 'object', objectId: pick(tenantChannels).id, actions: ['publish'], effect: 'deny' });
        else Object.assign(block, { scope: 'object', objectId: pick(tenantChannels).id, actions: ['subscribe'], conditions: { 'resource.attributes.priority': { gte: 5 } } });
        role.blocks.push(block);
      }
      roles.push(role);
      tenantRoles.push(role);
    }
    for (let e = 0; e < SIZES.entitiesPerTenant; e++) {
      const kind = e < 900 ? 'device' : e < 980 ? 'human' : 'service';
      const entity = { id: randomUUID(), kind, tenantId: tenant.id, name: `${kind}-${t}-${e}` };
      entities.push(entity);
      const role = kind === 'device' ? tenantRoles[e % 8] : kind === 'human' ? tenantRoles[8] : tenantRoles[9];
      assignments.push({ entityId: entity.id, roleId: role.id, tenantId: tenant.id });
    }
  }
  const roleOf = new Map(assignments.map((a) => [a.entityId, a.roleId]));
  const channelsByTenant = new Map();
  for (const ch of channels) channelsByTenant.set(ch.tenantId, [...(channelsByTenant.get(ch.tenantId) ?? []), ch]);
  // Mostly own-tenant questions; one in ten crosses tenants (always denied).
  const requests = [];
  for (let i = 0; i < SIZES.requests; i++) {
    const entity = pick(entities);
    const own = rand() < 0.9;
    const channel = own ? pick(channelsByTenant.get(entity.tenantId)) : pick(channels);
    requests.push({ subjectId: entity.id, action: pick(['publish', 'subscribe', 'read']), channelId: channel.id });
  }
  return { tenants, entities, channels, groups, roles, assignments, requests, roleOf, blockCount: roles.length * SIZES.blocksPerRole };
}

const ADMIN_DATABASE_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh database for the in-process engine; drop() removes it. */
export async function createBenchDatabase() {
  const name = `bench_authz_${randomBytes(5).toString('hex')}`;
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const a = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}

async function insertRows(sql, table, rows, chunk = 2000) {
  for (let i = 0; i < rows.length; i += chunk) await sql`insert into ${sql(table)} ${sql(rows.slice(i, i + chunk))}`;
}

/** Seeds the world with bulk inserts (the schema is the service's, migrated beforehand). */
export async function seedWorld(sql, w) {
  await insertRows(sql, 'tenants', w.tenants.map((t) => ({ id: t.id, name: t.name })));
  await insertRows(sql, 'entities', w.entities.map((e) => ({ id: e.id, kind: e.kind, name: e.name, tenant_id: e.tenantId })));
  await insertRows(sql, 'resources', w.channels.map((c) => ({ id: c.id, kind: 'channel', name: `ch-${c.id.slice(0, 8)}`, tenant_id: c.tenantId, attributes: sql.json({ zone: c.zone, priority: c.priority }) })));
  await insertRows(sql, 'groups', w.groups.map((g) => ({ id: g.id, name: `g-${g.id.slice(0, 8)}`, tenant_id: g.tenantId, group_type: 'object', parent_id: null })));
  for (const g of w.groups) if (g.parentId) await sql`update groups set parent_id = ${g.parentId} where id = ${g.id}`;
  await insertRows(sql, 'object_group_resources', w.channels.map((c) => ({ group_id: c.groupId, resource_id: c.id })));
  const actions = new Map((await sql`select id, name from actions`).map((a) => [a.name, a.id]));
  const blocks = w.roles.flatMap((r) => r.blocks);
  await insertRows(sql, 'permission_blocks', blocks.map((b) => ({
    id: b.id, tenant_id: b.tenantId, scope_mode: b.scope, effect: b.effect, conditions: sql.json(b.conditions ?? {}),
    object_kind: b.scope === 'object' || b.scope === 'group_descendant_objects' || b.scope === 'object_type' ? 'resource' : null,
    object_type: b.scope === 'object_type' ? 'resource:channel' : null, object_id: b.objectId ?? null, group_id: b.groupId ?? null,
  })));
  await insertRows(sql, 'permission_block_actions', blocks.flatMap((b) => b.actions.map((a) => ({ block_id: b.id, action_id: actions.get(a) }))));
  await insertRows(sql, 'roles', w.roles.map((r) => ({ id: r.id, name: r.name, tenant_id: r.tenantId })));
  await insertRows(sql, 'role_permission_blocks', w.roles.flatMap((r) => r.blocks.map((b) => ({ role_id: r.id, block_id: b.id }))));
  await insertRows(sql, 'role_assignments', w.assignments.map((a) => ({ tenant_id: a.tenantId, subject_kind: 'entity', entity_id: a.entityId, role_id: a.roleId })));
  await sql`analyze`;
}

/** The same policy set as Cedar text: roles are parents of principals; groups and tenants parents of resources. */
export function cedarPolicies(w) {
  const out = [];
  const action = (list) => (list.length === 1 ? `action == Action::"${list[0]}"` : `action in [${list.map((a) => `Action::"${a}"`).join(', ')}]`);
  for (const role of w.roles) {
    for (const b of role.blocks) {
      const effect = b.effect === 'deny' ? 'forbid' : 'permit';
      const principal = `principal in Role::"${role.id}"`;
      let resource;
      if (b.scope === 'object') resource = `resource == Channel::"${b.objectId}"`;
      else if (b.scope === 'group_descendant_objects') resource = `resource in Group::"${b.groupId}"`;
      else resource = `resource is Channel in Tenant::"${b.tenantId}"`;
      let when = '';
      if (b.conditions?.['resource.attributes.zone']) when = ` when { resource has zone && resource.zone == "${b.conditions['resource.attributes.zone']}" }`;
      if (b.conditions?.['resource.attributes.priority']) when = ` when { resource has priority && resource.priority >= ${b.conditions['resource.attributes.priority'].gte} }`;
      out.push(`@id("${b.id}")\n${effect}(${principal}, ${action(b.actions)}, ${resource})${when};`);
    }
  }
  return out.join('\n');
}

/** Per request, the entity slice Cedar needs: principal with its role, the channel with its group chain and tenant. */
export function cedarEntitySlices(w) {
  const groupById = new Map(w.groups.map((g) => [g.id, g]));
  const channelById = new Map(w.channels.map((c) => [c.id, c]));
  const entityById = new Map(w.entities.map((e) => [e.id, e]));
  return w.requests.map((r) => {
    const entity = entityById.get(r.subjectId);
    const roleId = w.roleOf.get(r.subjectId);
    const ch = channelById.get(r.channelId);
    const slice = [
      { uid: { type: 'Entity', id: entity.id }, attrs: { kind: entity.kind }, parents: [{ type: 'Role', id: roleId }] },
      { uid: { type: 'Role', id: roleId }, attrs: {}, parents: [] },
      { uid: { type: 'Channel', id: ch.id }, attrs: { zone: ch.zone, priority: ch.priority }, parents: [{ type: 'Group', id: ch.groupId }, { type: 'Tenant', id: ch.tenantId }] },
      { uid: { type: 'Tenant', id: ch.tenantId }, attrs: {}, parents: [] },
    ];
    for (let g = groupById.get(ch.groupId); g; g = g.parentId ? groupById.get(g.parentId) : undefined) {
      slice.push({ uid: { type: 'Group', id: g.id }, attrs: {}, parents: g.parentId ? [{ type: 'Group', id: g.parentId }] : [] });
    }
    return {
      principal: { type: 'Entity', id: r.subjectId }, action: { type: 'Action', id: r.action }, resource: { type: 'Channel', id: r.channelId },
      context: {}, entities: slice,
    };
  });
}

/** casbin RBAC with domains: g = user, role, tenant; g2 = object, group (channel -> leaf -> ... -> root). Conditions are not expressed. */
export const CASBIN_MODEL = `
[request_definition]
r = sub, dom, obj, act

[policy_definition]
p = sub, dom, obj, act, eft

[role_definition]
g = _, _, _
g2 = _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = g(r.sub, p.sub, r.dom) && r.dom == p.dom && (r.obj == p.obj || g2(r.obj, p.obj)) && r.act == p.act
`;

export function casbinRules(w) {
  const p = [];
  for (const role of w.roles) {
    for (const b of role.blocks) {
      const eft = b.effect === 'deny' ? 'deny' : 'allow';
      const obj = b.scope === 'object' ? b.objectId : b.scope === 'group_descendant_objects' ? b.groupId : `tenant:${b.tenantId}`;
      for (const a of b.actions) p.push([role.id, b.tenantId, obj, a, eft]);
    }
  }
  const g = w.assignments.map((a) => [a.entityId, a.roleId, a.tenantId]);
  const g2 = [
    ...w.channels.flatMap((c) => [[c.id, c.groupId], [c.id, `tenant:${c.tenantId}`]]),
    ...w.groups.filter((x) => x.parentId).map((x) => [x.id, x.parentId]),
  ];
  const tenantOf = new Map(w.entities.map((e) => [e.id, e.tenantId]));
  const requests = w.requests.map((r) => [r.subjectId, tenantOf.get(r.subjectId), r.channelId, r.action]);
  return { p, g, g2, requests };
}
