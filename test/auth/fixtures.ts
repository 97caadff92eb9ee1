// SQL fixtures for auth tests: tenants, entities and grants written directly, so these tests do not
// depend on the management API of other domains.
import type { TestService } from '../helpers/service.js';

export async function insertTenant(ts: TestService, name: string, status = 'active'): Promise<string> {
  const [row] = await ts.service.sql<{ id: string }[]>`
    insert into tenants (name, alias, status, deleted_at) values (${name}, ${name.toLowerCase().replace(/[^a-z0-9-]/g, '-')}, ${status},
      ${status === 'deleted' ? new Date() : null}) returning id`;
  return (row as { id: string }).id;
}

export async function insertEntity(ts: TestService, e: { name: string; kind?: string; tenantId?: string | null; status?: string; email?: string }) {
  const sql = ts.service.sql;
  const [row] = await sql<{ id: string }[]>`
    insert into entities (kind, name, tenant_id, status) values (${e.kind ?? 'human'}, ${e.name}, ${e.tenantId ?? null}, ${e.status ?? 'active'})
    returning id`;
  const id = (row as { id: string }).id;
  if (e.email) await sql`insert into entity_emails (entity_id, email, verified_at) values (${id}, ${e.email}, now())`;
  return id;
}

/**
 * A tenant admin as SPEC.md describes it: a tenant-owned role with tenant-scoped manage, read and
 * policy.manage plus manage on credential, assigned in that tenant.
 */
export async function makeTenantAdmin(ts: TestService, tenantId: string, entityId: string): Promise<void> {
  const sql = ts.service.sql;
  const [role] = await sql<{ id: string }[]>`
    insert into roles (name, tenant_id, description) values ('tenant-admin', ${tenantId}, 'test tenant admin') returning id`;
  const [block] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, effect) values (${tenantId}, 'tenant', 'allow') returning id`;
  await sql`
    insert into permission_block_actions (block_id, action_id)
    select ${block!.id}, id from actions where name in ('manage', 'read', 'policy.manage', 'role.manage')`;
  const [credBlock] = await sql<{ id: string }[]>`
    insert into permission_blocks (tenant_id, scope_mode, object_kind, effect) values (${tenantId}, 'object_kind', 'credential', 'allow') returning id`;
  await sql`insert into permission_block_actions (block_id, action_id) select ${credBlock!.id}, id from actions where name = 'manage'`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id}), (${role!.id}, ${credBlock!.id})`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenantId}, 'entity', ${entityId}, ${role!.id})`;
  await sql`insert into tenant_memberships (tenant_id, entity_id) values (${tenantId}, ${entityId}) on conflict do nothing`;
}
