// TEMPORARY stand-in for the authorization engine until src/authz/index.ts (createAuthz) lands: a
// small, deny-by-default evaluation of platform, tenant, object-kind and exact-object permission blocks
// reached through role assignments, principal groups and direct policies, with deny winning and the
// scoped-token ceiling applied. Delete once main.ts composes the real engine.
import type { Principal } from './principal.js';
import type { Authz, Decision, ObjectRef } from '../authz/types.js';
import type { Sql } from '../db/client.js';
import { forbidden } from '../errors.js';

interface Block {
  effect: string;
  scope_mode: string;
  tenant_id: string | null;
  object_kind: string | null;
  object_id: string | null;
  actions: string[];
}

export function createInterimAuthz(sql: Sql): Authz {
  async function objectTenant(ref: ObjectRef): Promise<string | null> {
    if (ref.id === null) return ref.tenantId ?? null;
    if (ref.kind === 'tenant') return ref.id;
    if (ref.kind === 'entity') return (await sql<{ t: string | null }[]>`select tenant_id as t from entities where id = ${ref.id}`)[0]?.t ?? null;
    if (ref.kind === 'credential') {
      return (await sql<{ t: string | null }[]>`select e.tenant_id as t from credentials c join entities e on e.id = c.entity_id where c.id = ${ref.id}`)[0]?.t ?? null;
    }
    return ref.tenantId ?? null;
  }

  const covers = (b: Pick<Block, 'scope_mode' | 'tenant_id' | 'object_kind' | 'object_id'>, ref: ObjectRef, tenant: string | null) =>
    b.scope_mode === 'platform'
    || (b.scope_mode === 'tenant' && tenant !== null && b.tenant_id === tenant)
    || (b.scope_mode === 'object_kind' && b.object_kind === ref.kind && (b.tenant_id === null || b.tenant_id === tenant))
    || (b.scope_mode === 'object' && ref.id !== null && b.object_id === ref.id);

  async function authorize(subjectId: string, action: string, ref: ObjectRef, ceilingId: string | null): Promise<Decision> {
    const [subject] = await sql<{ status: string }[]>`select status from entities where id = ${subjectId} and deleted_at is null`;
    if (!subject) return { allowed: false, reason: 'subject not found', blockIds: [] };
    if (subject.status !== 'active') return { allowed: false, reason: 'subject is not active', blockIds: [] };
    const tenant = await objectTenant(ref);
    if (tenant) {
      const [t] = await sql<{ status: string }[]>`select status from tenants where id = ${tenant}`;
      if (t && t.status !== 'active') return { allowed: false, reason: `tenant is ${t.status}`, blockIds: [] };
    }
    const blocks = await sql<(Block & { id: string })[]>`
      with groups as (select group_id from principal_group_members where entity_id = ${subjectId}),
      ids as (
        select rpb.block_id from role_assignments ra join roles r on r.id = ra.role_id and r.deleted_at is null
          join role_permission_blocks rpb on rpb.role_id = ra.role_id
        where ra.entity_id = ${subjectId} or ra.group_id in (select group_id from groups)
        union select block_id from direct_policies where entity_id = ${subjectId} or group_id in (select group_id from groups))
      select b.id, b.effect, b.scope_mode, b.tenant_id, b.object_kind, b.object_id,
        case when b.all_actions then array(select name from actions) else array(
          select a.name from permission_block_actions pa join actions a on a.id = pa.action_id where pa.block_id = b.id) end as actions
      from permission_blocks b where b.id in (select block_id from ids)`;
    const matching = blocks.filter((b) => b.actions.includes(action) && covers(b, ref, tenant));
    const deny = matching.find((b) => b.effect === 'deny');
    if (deny) return { allowed: false, reason: 'explicitly denied', blockIds: [deny.id] };
    const allows = matching.filter((b) => b.effect === 'allow');
    if (allows.length === 0) return { allowed: false, reason: 'no matching allow policy', blockIds: [] };
    if (ceilingId) {
      const limits = await sql<Block[]>`
        select 'allow' as effect, scope_mode, tenant_id, object_kind, object_id, actions
        from credential_permission_limits where credential_id = ${ceilingId}`;
      if (!limits.some((l) => l.actions.includes(action) && covers(l, ref, tenant))) {
        return { allowed: false, reason: 'denied by access token permission ceiling', blockIds: [] };
      }
    }
    return { allowed: true, reason: 'allowed', blockIds: allows.map((b) => b.id) };
  }

  const authz: Authz = {
    authorize: (r) => authorize(r.subjectId, r.action, r.object, r.ceilingCredentialId ?? null),
    decide: (p: Principal, action, object) => authorize(p.entityId, action, object, p.scoped ? p.credentialId : null),
    async require(p, action, object) {
      if (!(await authz.decide(p, action, object)).allowed) throw forbidden();
    },
    async isPlatformAdmin(p) {
      if (p.scoped) return false;
      return (await authorize(p.entityId, 'manage', { kind: 'tenant', id: null, tenantId: null }, null)).allowed
        && (await sql`select 1 from role_assignments ra join role_permission_blocks rpb on rpb.role_id = ra.role_id
          join permission_blocks b on b.id = rpb.block_id and b.scope_mode = 'platform' and b.effect = 'allow'
          where ra.entity_id = ${p.entityId} limit 1`).length > 0;
    },
    async invalidate() {
      // Nothing cached.
    },
  };
  return authz;
}
