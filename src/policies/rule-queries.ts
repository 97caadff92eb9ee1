// SQL of guardrail rules (action_assignment_rules): global and per-tenant, and the absolute ones that bind.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';

export interface RuleRow {
  id: string;
  tenant_id: string | null;
  entity_kind: string;
  action_name: string;
  object_kind: string;
  object_type: string | null;
  decision: 'allow' | 'deny' | 'require_override';
  is_absolute: boolean;
  created_at: string | Date;
}

const COLUMNS = 'id, tenant_id, entity_kind, action_name, object_kind, object_type, decision, is_absolute, created_at';

export async function findRule(sql: Queryable, id: string): Promise<RuleRow | undefined> {
  const [row] = await sql<RuleRow[]>`select ${sql.unsafe(COLUMNS)} from action_assignment_rules where id = ${id}`;
  return row;
}

export interface NewRule {
  tenantId: string | null;
  entityKind: string;
  actionName: string;
  objectKind: string;
  objectType: string | null;
  decision: RuleRow['decision'];
  isAbsolute: boolean;
}

export async function insertRule(sql: Queryable, r: NewRule): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into action_assignment_rules (tenant_id, entity_kind, action_name, object_kind, object_type, decision, is_absolute)
    values (${r.tenantId}, ${r.entityKind}, ${r.actionName}, ${r.objectKind}, ${r.objectType}, ${r.decision}, ${r.isAbsolute})
    returning id`;
  return row.id;
}

export async function deleteRule(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from action_assignment_rules where id = ${id} returning id`;
  return rows.length === 1;
}

/**
 * Global absolute rules with one of `decisions` that overlap the pair: the same entity kind, action and
 * object kind, with a type that covers it, is covered by it, or is the same.
 */
export async function absoluteConflicts(sql: Queryable, r: NewRule, decisions: string[]): Promise<RuleRow[]> {
  return sql<RuleRow[]>`
    select ${sql.unsafe(COLUMNS)} from action_assignment_rules
    where tenant_id is null and is_absolute and decision = any(${decisions}::text[])
      and entity_kind = ${r.entityKind} and action_name = ${r.actionName} and object_kind = ${r.objectKind}
      and (object_type is null or ${r.objectType}::text is null or object_type = ${r.objectType})
    order by created_at, id`;
}

export interface RuleFilter {
  /** Rules in force in this tenant: the global ones and the tenant's own. */
  tenantId?: string;
  /** Visibility: null = every rule; else global rules and these tenants' rules. */
  readableTenantIds: string[] | null;
  entityKind?: string;
  actionName?: string;
  objectKind?: string;
  objectType?: string;
  decision?: string;
}

export async function listRules(sql: Queryable, f: RuleFilter, page: Page): Promise<ListResult<RuleRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.tenantId) conds.push(sql`(tenant_id is null or tenant_id = ${f.tenantId})`);
  if (f.readableTenantIds !== null) conds.push(sql`(tenant_id is null or tenant_id = any(${f.readableTenantIds}::uuid[]))`);
  if (f.entityKind) conds.push(sql`entity_kind = ${f.entityKind}`);
  if (f.actionName) conds.push(sql`action_name = ${f.actionName}`);
  if (f.objectKind) conds.push(sql`object_kind = ${f.objectKind}`);
  if (f.objectType) conds.push(sql`(object_type is null or object_type = ${f.objectType})`);
  if (f.decision) conds.push(sql`decision = ${f.decision}`);
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<RuleRow>(sql, {
    columns: sql.unsafe(COLUMNS),
    from: sql`from action_assignment_rules where ${where}`,
    // Global rules first, then by what they are about.
    order: sql`tenant_id nulls first, entity_kind, action_name, object_kind, object_type nulls first, decision, id`,
  }, page);
}
