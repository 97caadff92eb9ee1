// orphanPolicies (the admin UI's risk panel, INTERFACES.md 1.5): direct policies and role assignments
// whose subject, role or block target is gone or deleted. Platform administrators only.
import type { Principal } from '../auth/principal.js';
import type { Authz } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf } from '../db/paging.js';
import { forbidden } from '../errors.js';
import { listOrphans, type OrphanRow } from './orphan-queries.js';

const DEFAULT_LIMIT = 50;

export function createOrphanPolicies(deps: { sql: Sql; authz: Authz; lists: { maxLimit: number } }) {
  return async function orphanPolicies(p: Principal, args: { limit?: number | null; offset?: number | null }) {
    if (!(await deps.authz.isPlatformAdmin(p))) throw forbidden();
    const page = pageOf({ limit: args.limit ?? DEFAULT_LIMIT, offset: args.offset }, { defaultLimit: DEFAULT_LIMIT, maxLimit: deps.lists.maxLimit });
    return (await listOrphans(deps.sql, page)).map(toOrphan);
  };
}

export type OrphanPolicies = ReturnType<typeof createOrphanPolicies>;

function toOrphan(r: OrphanRow) {
  return {
    id: r.id, tenantId: r.tenant_id, sourceKind: r.source_kind, subjectKind: r.subject_kind, subjectId: r.subject_id,
    roleId: r.role_id, permissionBlockId: r.permission_block_id, orphanReason: r.orphan_reason, createdAt: new Date(r.created_at).toISOString(),
  };
}
