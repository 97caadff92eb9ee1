// SQL of profiles (device types) and profile versions.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';

export interface ProfileRow {
  id: string;
  tenant_id: string | null;
  object_kind: string;
  kind: string;
  key: string;
  display_name: string;
  description: string | null;
  status: string;
  created_at: string | Date;
  updated_at: string | Date | null;
}

export interface VersionRow {
  id: string;
  profile_id: string;
  version: number;
  json_schema: Record<string, unknown>;
  ui_schema: Record<string, unknown>;
  status: string;
  created_at: string | Date;
  updated_at: string | Date | null;
}

const profileColumns = (sql: Queryable) =>
  sql`p.id, p.tenant_id, p.object_kind, p.kind, p.key, p.display_name, p.description, p.status, p.created_at, p.updated_at`;
const versionColumns = (sql: Queryable) =>
  sql`v.id, v.profile_id, v.version, v.json_schema, v.ui_schema, v.status, v.created_at, v.updated_at`;

export async function findProfile(sql: Queryable, id: string, lock = false): Promise<ProfileRow | undefined> {
  const [row] = await sql<ProfileRow[]>`select ${profileColumns(sql)} from profiles p where p.id = ${id} ${lock ? sql`for update` : sql``}`;
  return row;
}

export async function findVersion(sql: Queryable, id: string): Promise<VersionRow | undefined> {
  const [row] = await sql<VersionRow[]>`select ${versionColumns(sql)} from profile_versions v where v.id = ${id}`;
  return row;
}

/** The binding a profile gets when no version is named: its newest active version. */
export async function newestActiveVersion(sql: Queryable, profileId: string): Promise<VersionRow | undefined> {
  const [row] = await sql<VersionRow[]>`
    select ${versionColumns(sql)} from profile_versions v where v.profile_id = ${profileId} and v.status = 'active'
    order by v.version desc limit 1`;
  return row;
}

export async function listVersions(sql: Queryable, profileId: string): Promise<VersionRow[]> {
  return sql<VersionRow[]>`select ${versionColumns(sql)} from profile_versions v where v.profile_id = ${profileId} order by v.version`;
}

export async function maxVersion(sql: Queryable, profileId: string): Promise<number> {
  const [row] = await sql<[{ max: number | null }]>`select max(version)::int as max from profile_versions where profile_id = ${profileId}`;
  return row.max ?? 0;
}

export interface NewProfile {
  tenantId: string | null;
  objectKind: string;
  kind: string;
  key: string;
  displayName: string;
  description: string | null;
  status: string;
}

export async function insertProfile(sql: Queryable, p: NewProfile): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into profiles (tenant_id, object_kind, kind, key, display_name, description, status)
    values (${p.tenantId}, ${p.objectKind}, ${p.kind}, ${p.key}, ${p.displayName}, ${p.description}, ${p.status})
    returning id`;
  return row.id;
}

export async function insertVersion(sql: Queryable, v: { profileId: string; version: number; jsonSchema: object; uiSchema: object; status: string }): Promise<string> {
  const [row] = await sql<[{ id: string }]>`
    insert into profile_versions (profile_id, version, json_schema, ui_schema, status)
    values (${v.profileId}, ${v.version}, ${sql.json(v.jsonSchema as postgres.JSONValue)}, ${sql.json(v.uiSchema as postgres.JSONValue)}, ${v.status})
    returning id`;
  return row.id;
}

export async function updateProfile(sql: Queryable, id: string, c: { displayName?: string; description?: string | null; status?: string }): Promise<void> {
  await sql`
    update profiles set
      display_name = ${c.displayName === undefined ? sql`display_name` : sql`${c.displayName}`},
      description = ${c.description === undefined ? sql`description` : sql`${c.description}`},
      status = ${c.status === undefined ? sql`status` : sql`${c.status}`},
      updated_at = now()
    where id = ${id}`;
}

export async function setVersionStatus(sql: Queryable, id: string, status: string): Promise<void> {
  await sql`update profile_versions set status = ${status}, updated_at = now() where id = ${id}`;
}

export interface ProfileFilter {
  /** null = every tenant's; otherwise these tenants' and the platform-wide ones. */
  readableTenantIds: string[] | null;
  tenantId?: string;
  objectKind?: string;
  kind?: string;
  status?: string;
}

export async function listProfiles(sql: Queryable, f: ProfileFilter, page: Page): Promise<ListResult<ProfileRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (f.readableTenantIds !== null) conds.push(sql`(p.tenant_id is null or p.tenant_id = any(${f.readableTenantIds}::uuid[]))`);
  if (f.tenantId) conds.push(sql`p.tenant_id = ${f.tenantId}`);
  if (f.objectKind) conds.push(sql`p.object_kind = ${f.objectKind}`);
  if (f.kind) conds.push(sql`p.kind = ${f.kind}`);
  if (f.status) conds.push(sql`p.status = ${f.status}`);
  const where = conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
  return selectPage<ProfileRow>(sql, {
    columns: profileColumns(sql),
    from: sql`from profiles p where ${where}`,
    order: sql`p.tenant_id nulls first, p.kind, p.key, p.id`,
  }, page);
}
