// Guardrails: one case per row of SPEC.md's precedence, the sub-type rules, then checkGrant against the
// seeded global rules (the spec's example: delete on channels for a device is rejected), overrides,
// principal groups, membership changes and the tenant-admin hook.
import t from 'tap';
import type { Principal } from '../../src/auth/principal.js';
import { createTenantAdminRole, evaluateGuardrail, TENANT_ADMIN_DESCRIPTION } from '../../src/authz/index.js';
import type { RuleRow } from '../../src/authz/guardrails-queries.js';
import { startEngine } from './helpers/engine.js';
import type { World } from './helpers/world.js';

const T1 = '11111111-1111-1111-1111-111111111111';
const T2 = '22222222-2222-2222-2222-222222222222';
let n = 0;
function rule(tenant: string | null, decision: RuleRow['decision'], options: { absolute?: boolean; type?: string | null; kind?: string; action?: string; objectKind?: string } = {}): RuleRow {
  return {
    id: `r${++n}`, tenant_id: tenant, entity_kind: options.kind ?? 'device', action_name: options.action ?? 'delete',
    object_kind: options.objectKind ?? 'resource', object_type: options.type === undefined ? null : options.type, decision, is_absolute: options.absolute ?? false,
  };
}
const CHANNEL_DELETE = { action: 'delete', objectKind: 'resource', objectType: 'resource:channel' };

t.test('precedence: one case per row', async (t) => {
  const rows: [string, RuleRow[], string, string][] = [
    ['global absolute deny', [rule(null, 'allow'), rule(T1, 'allow'), rule(null, 'deny', { absolute: true })], 'deny', 'global absolute deny'],
    ['global absolute require_override', [rule(T1, 'deny'), rule(null, 'require_override', { absolute: true }), rule(null, 'allow')], 'require_override', 'global absolute require_override'],
    ['tenant deny', [rule(T1, 'allow'), rule(T1, 'deny'), rule(null, 'allow'), rule(T1, 'require_override')], 'deny', 'tenant deny'],
    ['tenant require_override', [rule(T1, 'require_override'), rule(T1, 'allow'), rule(null, 'deny')], 'require_override', 'tenant require_override'],
    ['tenant allow', [rule(T1, 'allow'), rule(null, 'deny'), rule(null, 'require_override')], 'allow', 'tenant allow'],
    ['global deny', [rule(null, 'allow'), rule(null, 'deny'), rule(null, 'require_override')], 'deny', 'global deny'],
    ['global require_override', [rule(null, 'allow'), rule(null, 'require_override')], 'require_override', 'global require_override'],
    ['global allow', [rule(null, 'allow'), rule(T2, 'deny')], 'allow', 'global allow'],
    ['default deny', [rule(T2, 'allow'), rule(null, 'allow', { kind: 'human' }), rule(null, 'allow', { action: 'read' })], 'deny', 'default deny'],
  ];
  for (const [name, rules, decision, step] of rows) {
    const v = evaluateGuardrail(rules, 'device', CHANNEL_DELETE, T1);
    t.equal(v.decision, decision, `${name}: decision`);
    t.equal(v.step, step, `${name}: deciding row`);
  }
});

t.test('sub-types: restrictive rules on a type bite a kind-wide grant; allows on a type do not cover the kind', async (t) => {
  const kindWide = { action: 'delete', objectKind: 'resource', objectType: null };
  t.equal(evaluateGuardrail([rule(null, 'deny', { absolute: true, type: 'resource:channel' }), rule(null, 'allow')], 'device', kindWide, null).decision, 'deny');
  t.equal(evaluateGuardrail([rule(null, 'allow', { type: 'resource:channel' })], 'device', kindWide, null).step, 'default deny');
  t.equal(evaluateGuardrail([rule(null, 'deny', { absolute: true })], 'device', CHANNEL_DELETE, null).decision, 'deny', 'a kind rule covers every type');
  t.equal(evaluateGuardrail([rule(null, 'allow', { type: 'resource:rule' })], 'device', CHANNEL_DELETE, null).step, 'default deny', 'another type does not match');
});

const world: World = {
  tenants: { acme: {} },
  entities: {
    admin: { kind: 'human', id: '00000000-0000-0000-0000-000000000001' },
    ann: { kind: 'human' },
    dev: { kind: 'device', tenant: 'acme' },
    wl: { kind: 'workload', tenant: 'acme' },
    svc: { kind: 'service', tenant: 'acme' },
  },
  resources: { ch: { kind: 'channel', tenant: 'acme' } },
  groups: { devices: { type: 'principal', tenant: 'acme' }, managers: { type: 'principal', tenant: 'acme' } },
  objectMembers: [],
  principalMembers: [['devices', 'dev'], ['devices', 'ann']],
  blocks: { manageResources: { scope: 'object_kind', tenant: 'acme', objectKind: 'resource', actions: ['manage'] } },
  roles: { 'resource-managers': { tenant: 'acme', blocks: ['manageResources'] } },
  assignments: [{ group: 'managers', role: 'resource-managers', tenant: 'acme' }],
  policies: [],
  credentials: {},
};

function principalOf(entityId: string, kind: Principal['entityKind'] = 'human'): Principal {
  return { entityId, entityKind: kind, homeTenantId: null, tenantId: null, sessionId: null, credentialId: null, credentialKind: 'session', scoped: false };
}

t.test('checkGrant against the seeded global rules', async (t) => {
  const { authz, ids, sql, audit } = await startEngine(t, world);
  const acme = ids.acme as string;
  const admin = principalOf(ids.admin as string);
  const grant = (subject: { kind: 'entity' | 'group'; id: string }, block: Record<string, unknown>, actor: Principal | null = null) =>
    authz.checkGrant(sql, { tenantId: acme, subject, blocks: [{ tenantId: acme, effect: 'allow', ...block } as never], actor, operation: 'test.grant' });

  // SPEC.md's example, with the exact error contract.
  await t.rejects(grant({ kind: 'entity', id: ids.dev as string }, { scopeMode: 'object_type', objectKind: 'resource', objectType: 'resource:channel', actions: ['delete'] }), {
    kind: 'INVALID_INPUT', code: 'action_not_allowed_for_entity_kind', message: 'guardrail rejected device receiving delete on resource:channel',
  });
  // An absolute deny is not lifted by a platform administrator.
  await t.rejects(grant({ kind: 'entity', id: ids.dev as string }, { scopeMode: 'object', objectKind: 'resource', objectId: ids.ch, actions: ['write'] }, admin),
    { code: 'action_not_allowed_for_entity_kind', message: 'guardrail rejected device receiving write on resource:channel' });
  // Ordinary grants pass.
  t.same((await grant({ kind: 'entity', id: ids.dev as string }, { scopeMode: 'object', objectKind: 'resource', objectId: ids.ch, actions: ['publish', 'subscribe'] })).overrides, []);
  t.ok((await grant({ kind: 'entity', id: ids.ann as string }, { scopeMode: 'tenant', actions: ['manage', 'read', 'policy.manage', 'role.manage'] })).pairsChecked > 10);
  await grant({ kind: 'entity', id: ids.svc as string }, { scopeMode: 'tenant', actions: ['manage', 'read'] });
  // A deny block grants nothing, so it needs no permission.
  await grant({ kind: 'entity', id: ids.dev as string }, { scopeMode: 'tenant', actions: ['delete'], effect: 'deny' });
  // Default deny bites unusual grants.
  await t.rejects(grant({ kind: 'entity', id: ids.wl as string }, { scopeMode: 'object_kind', objectKind: 'resource', actions: ['manage'] }),
    { message: 'guardrail rejected workload receiving manage on resource' });
  // A principal group reaches its members' kinds: the device member is what fails.
  await t.rejects(grant({ kind: 'group', id: ids.devices as string }, { scopeMode: 'object_kind', objectKind: 'resource', actions: ['delete'] }),
    { message: /guardrail rejected device receiving delete on resource/ });

  // require_override: refused without a platform administrator, passed (and reported) with one.
  await sql`insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, decision) values (null, 'workload', 'write', 'resource', 'require_override')`;
  const override = { scopeMode: 'object_kind', objectKind: 'resource', actions: ['write'] };
  await t.rejects(grant({ kind: 'entity', id: ids.wl as string }, override, principalOf(ids.ann as string)),
    { code: 'action_not_allowed_for_entity_kind', message: 'guardrail requires override for workload receiving write on resource' });
  const passed = await grant({ kind: 'entity', id: ids.wl as string }, override, admin);
  t.equal(passed.overrides.length, 1);
  t.match(passed.overrides[0], { entityKind: 'workload', action: 'write', objectKind: 'resource' });
  authz.recordOverrides(passed, { actor: admin, tenantId: acme, operation: 'role_assignment.create' });

  // Membership change: a device joining a group that holds manage on resources is rejected.
  await t.rejects(authz.checkMembership(sql, { groupId: ids.managers as string, entityId: ids.dev as string, actor: admin }),
    { message: 'guardrail rejected device receiving manage on resource' });
  await authz.checkMembership(sql, { groupId: ids.managers as string, entityId: ids.ann as string, actor: null });

  await audit.flush();
  const events = await sql<{ event: string; outcome: string; n: number }[]>`select event, outcome, count(*)::int as n from audit_log group by 1, 2 order by 1`;
  t.same(events, [{ event: 'guardrail.override', outcome: 'allow', n: 1 }, { event: 'guardrail.rejected', outcome: 'deny', n: 6 }]);
});

t.test('tenant creation hook: tenant-admin role with exactly the SPEC grants, bound to the creator', async (t) => {
  const { authz, ids, sql } = await startEngine(t, world);
  const acme = ids.acme as string;
  const ann = ids.ann as string;
  t.equal((await authz.authorize({ subjectId: ann, action: 'manage', object: { kind: 'resource', id: ids.ch as string } })).allowed, false, 'nothing before');

  const created = await sql.begin((tx) => createTenantAdminRole(tx, { tenantId: acme, creatorEntityId: ann }));
  await authz.invalidate(created.invalidation);
  const [role] = await sql`select name, description, tenant_id from roles where id = ${created.roleId}`;
  t.same(role, { name: 'tenant-admin', description: TENANT_ADMIN_DESCRIPTION, tenant_id: acme });
  const blocks = await sql`
    select b.scope_mode, b.tenant_id, b.object_kind, b.effect, array(select a.name from permission_block_actions p join actions a on a.id = p.action_id where p.block_id = b.id order by 1) as actions
    from permission_blocks b join role_permission_blocks r on r.block_id = b.id where r.role_id = ${created.roleId} order by b.scope_mode, b.object_kind`;
  t.same(blocks, [
    { scope_mode: 'object_kind', tenant_id: acme, object_kind: 'audit_log', effect: 'allow', actions: ['read'] },
    { scope_mode: 'object_kind', tenant_id: acme, object_kind: 'credential', effect: 'allow', actions: ['manage'] },
    { scope_mode: 'tenant', tenant_id: acme, object_kind: null, effect: 'allow', actions: ['manage', 'policy.manage', 'read', 'role.manage'] },
  ]);
  const [assignment] = await sql`select tenant_id, entity_id, subject_kind from role_assignments where id = ${created.assignmentId}`;
  t.same(assignment, { tenant_id: acme, entity_id: ann, subject_kind: 'entity' });

  const may = async (action: string, object: Parameters<typeof authz.authorize>[0]['object']) => (await authz.authorize({ subjectId: ann, action, object })).allowed;
  t.ok(await may('manage', { kind: 'resource', id: ids.ch as string }));
  t.ok(await may('policy.manage', { kind: 'tenant', id: acme }));
  t.ok(await may('read', { kind: 'audit_log', id: null, tenantId: acme }));
  t.ok(await may('manage', { kind: 'credential', id: null, tenantId: acme }));
  t.notOk(await may('manage', { kind: 'tenant', id: null, tenantId: null }), 'no platform manage on tenant');
  t.notOk(await may('create', { kind: 'tenant', id: null, tenantId: null }));

  // A device may not become a tenant administrator: the guardrails reject the hook itself.
  await t.rejects(sql.begin((tx) => createTenantAdminRole(tx, { tenantId: acme, creatorEntityId: ids.dev as string })),
    { code: 'action_not_allowed_for_entity_kind' });
});
