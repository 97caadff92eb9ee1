// SQL of reading the audit log: filtered pages, and a server-side cursor of JSON lines for the export.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { restrictsBeyondTenant, selectRows, type ListResult, type Page } from '../db/paging.js';

export interface AuditLogRow {
  id: string;
  actor_entity_id: string | null;
  tenant_id: string | null;
  target_kind: string | null;
  target_id: string | null;
  event: string;
  outcome: 'allow' | 'deny' | 'error';
  details: Record<string, unknown>;
  request_id: string | null;
  created_at: string | Date;
}

export interface AuditFilter {
  /** Visibility: null = every entry (platform readers); else only these tenants' entries, never platform ones. */
  visibleTenantIds: string[] | null;
  tenantId?: string;
  actorEntityId?: string;
  targetKind?: string;
  targetId?: string;
  /** Entries about an entity: it acted, or it was the target. */
  entityId?: string;
  /** Exact name, or a prefix ending in '.*' (guardrail.* matches guardrail.rejected and guardrail.override). */
  event?: string;
  outcome?: string;
  from?: Date;
  to?: Date;
}

function whereOf(sql: Queryable, f: AuditFilter) {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (restrictsBeyondTenant(f.visibleTenantIds, f.tenantId)) conds.push(sql`a.tenant_id = any(${f.visibleTenantIds}::uuid[])`);
  if (f.tenantId) conds.push(sql`a.tenant_id = ${f.tenantId}`);
  if (f.actorEntityId) conds.push(sql`a.actor_entity_id = ${f.actorEntityId}`);
  if (f.targetKind) conds.push(sql`a.target_kind = ${f.targetKind}`);
  if (f.targetId) conds.push(sql`a.target_id = ${f.targetId}`);
  if (f.entityId) conds.push(sql`(a.actor_entity_id = ${f.entityId} or (a.target_kind = 'entity' and a.target_id = ${f.entityId}))`);
  if (f.event) {
    if (f.event.endsWith('.*')) {
      const prefix = f.event.slice(0, -1).replace(/[\\%_]/g, (c) => `\\${c}`);
      conds.push(sql`a.event like ${`${prefix}%`}`);
    } else {
      conds.push(sql`a.event = ${f.event}`);
    }
  }
  if (f.outcome) conds.push(sql`a.outcome = ${f.outcome}`);
  if (f.from) conds.push(sql`a.created_at >= ${f.from}`);
  if (f.to) conds.push(sql`a.created_at < ${f.to}`);
  return conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
}

/**
 * A listing whose plan does not depend on the values bound (db/paging.ts listingSql): no time range or
 * event prefix (their selectivity is the values'), no visibility array beyond the tenant asked for.
 */
export function plainAuditListing(f: AuditFilter): boolean {
  return !f.from && !f.to && !f.event?.endsWith('.*') && !restrictsBeyondTenant(f.visibleTenantIds, f.tenantId);
}

/** Newest first (the index on created_at desc, id desc serves it). */
export async function listAuditLogs(sql: Queryable, f: AuditFilter, page: Page): Promise<ListResult<AuditLogRow>> {
  return selectRows<AuditLogRow & Record<string, unknown>>(sql, {
    columns: sql`a.id, a.actor_entity_id, a.tenant_id, a.target_kind, a.target_id, a.event, a.outcome, a.details, a.request_id, a.created_at`,
    from: sql`from audit_log a where ${whereOf(sql, f)}`,
    order: sql`a.created_at desc, a.id desc`,
  }, page);
}

/**
 * Oldest first, each row already one JSON line (the GraphQL AuditLog field names): PostgreSQL serialises,
 * the service only forwards text. A cursor of `batch` rows keeps memory flat however large the export.
 */
export function auditLogLines(sql: Queryable, f: AuditFilter, batch: number): AsyncIterable<{ line: string }[]> {
  return sql<{ line: string }[]>`
    select json_build_object(
      'id', a.id, 'actorEntityId', a.actor_entity_id, 'tenantId', a.tenant_id, 'targetKind', a.target_kind,
      'targetId', a.target_id, 'event', a.event, 'outcome', a.outcome, 'details', a.details, 'requestId', a.request_id,
      'createdAt', to_char(a.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text as line
    from audit_log a where ${whereOf(sql, f)}
    order by a.created_at, a.id`.cursor(batch);
}
