// SQL of actions and their applicability (which object kinds and types an action is valid on).
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';

export interface ApplicabilityJson {
  object_kind: string;
  object_type: string | null;
}

export interface ActionRow {
  id: string;
  name: string;
  description: string | null;
  is_system: boolean;
  created_at: string | Date;
  updated_at: string | Date | null;
  applicability: ApplicabilityJson[];
}

/** One action as JSON (alias `a`), with its applicability: embedded in blocks, roles and lists alike. */
export function actionJson(sql: Queryable) {
  return sql`json_build_object(
    'id', a.id, 'name', a.name, 'description', a.description, 'is_system', a.is_system,
    'created_at', a.created_at, 'updated_at', a.updated_at,
    'applicability', coalesce((
      select json_agg(json_build_object('object_kind', ap.object_kind, 'object_type', ap.object_type)
                      order by ap.object_kind, ap.object_type nulls first)
      from action_applicability ap where ap.action_id = a.id), '[]'::json))`;
}

export async function findAction(sql: Queryable, id: string): Promise<ActionRow | undefined> {
  const [row] = await sql<[{ j: ActionRow }?]>`select ${actionJson(sql)} as j from actions a where a.id = ${id}`;
  return row?.j;
}

/** Actions named by id or by name, for blocks and rules; the caller reports what did not resolve. */
export async function actionsByRef(sql: Queryable, ids: string[], names: string[]): Promise<{ id: string; name: string }[]> {
  return sql<{ id: string; name: string }[]>`
    select id, name from actions where id = any(${ids}::uuid[]) or name = any(${names}::text[])`;
}

export interface ActionFilter {
  objectKind?: string;
  objectType?: string;
}

export async function listActions(sql: Queryable, f: ActionFilter, page: Page): Promise<ListResult<{ j: ActionRow }>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.objectKind) {
    conds.push(sql`exists (select 1 from action_applicability ap where ap.action_id = a.id and ap.object_kind = ${f.objectKind}
      ${f.objectType ? sql`and (ap.object_type is null or ap.object_type = ${f.objectType})` : sql``})`);
  }
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<{ j: ActionRow }>(sql, {
    columns: sql`${actionJson(sql)} as j`,
    from: sql`from actions a where ${where}`,
    order: sql`a.name, a.id`,
  }, page);
}

export async function insertAction(sql: Queryable, a: { name: string; description: string | null }): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into actions (name, description) values (${a.name}, ${a.description}) returning id`;
  return row.id;
}

export async function updateAction(sql: Queryable, id: string, c: { name?: string; description?: string | null }): Promise<boolean> {
  const rows = await sql`
    update actions set
      name = ${c.name === undefined ? sql`name` : sql`${c.name}`},
      description = ${c.description === undefined ? sql`description` : sql`${c.description}`},
      updated_at = now()
    where id = ${id} returning id`;
  return rows.length === 1;
}

/** Blocks naming the action explicitly (system blocks covering every action do not count). */
export async function blocksUsingAction(sql: Queryable, id: string): Promise<number> {
  const [row] = await sql<[{ n: number }]>`select count(*)::int as n from permission_block_actions where action_id = ${id}`;
  return row.n;
}

/** Guardrail rules name actions by name: they go with the action, so a later namesake starts clean. */
export async function deleteAction(sql: Queryable, id: string, name: string): Promise<boolean> {
  await sql`delete from action_assignment_rules where action_name = ${name}`;
  const rows = await sql`delete from actions where id = ${id} returning id`;
  return rows.length === 1;
}

export interface ApplicabilityEntryRow {
  id: string;
  action_id: string;
  action_name: string;
  description: string | null;
  object_kind: string;
  object_type: string | null;
  created_at: string | Date;
}

export async function insertApplicability(sql: Queryable, actionId: string, kind: string, type: string | null): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into action_applicability (action_id, object_kind, object_type) values (${actionId}, ${kind}, ${type}) returning id`;
  return row.id;
}

export async function replaceApplicability(sql: Queryable, actionId: string, pairs: ApplicabilityJson[]): Promise<void> {
  await sql`delete from action_applicability where action_id = ${actionId}`;
  for (const p of pairs) await insertApplicability(sql, actionId, p.object_kind, p.object_type);
}

export async function deleteApplicability(sql: Queryable, actionId: string, kind: string, type: string | null): Promise<boolean> {
  const rows = await sql`
    delete from action_applicability
    where action_id = ${actionId} and object_kind = ${kind} and object_type is not distinct from ${type} returning id`;
  return rows.length === 1;
}

function entryColumns(sql: Queryable) {
  return sql`ap.id, ap.action_id, a.name as action_name, a.description, ap.object_kind, ap.object_type, ap.created_at`;
}

export async function findApplicability(sql: Queryable, id: string): Promise<ApplicabilityEntryRow | undefined> {
  const [row] = await sql<ApplicabilityEntryRow[]>`
    select ${entryColumns(sql)} from action_applicability ap join actions a on a.id = ap.action_id where ap.id = ${id}`;
  return row;
}

export async function listApplicability(sql: Queryable, f: { actionName?: string; objectKind?: string; objectType?: string }, page: Page) {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.actionName) conds.push(sql`a.name = ${f.actionName}`);
  if (f.objectKind) conds.push(sql`ap.object_kind = ${f.objectKind}`);
  if (f.objectType) conds.push(sql`(ap.object_type is null or ap.object_type = ${f.objectType})`);
  const where = conds.length ? conds.reduce((x, c) => sql`${x} and ${c}`) : sql`true`;
  return selectPage<ApplicabilityEntryRow>(sql, {
    columns: entryColumns(sql),
    from: sql`from action_applicability ap join actions a on a.id = ap.action_id where ${where}`,
    order: sql`a.name, ap.object_kind, ap.object_type nulls first, ap.id`,
  }, page);
}
