// SQL of credentials (passwords, access tokens and their ceilings, shared keys), signing keys and the
// service's own secret material.
import type { Queryable } from '../db/client.js';
import type { EntityKind } from './principal.js';

export interface CredentialRow {
  id: string;
  entity_id: string;
  kind: string;
  identifier: string | null;
  status: string;
  scoped: boolean;
  name: string | null;
  description: string | null;
  expires_at: Date | null;
  last_used_at: Date | null;
  created_at: Date;
  revoked_at: Date | null;
}

const META = (sql: Queryable) => sql`
  id, entity_id, kind, identifier, status, scoped, name, description, expires_at, last_used_at, created_at, revoked_at`;

export async function selectCredential(sql: Queryable, id: string): Promise<CredentialRow | null> {
  const [row] = await sql<CredentialRow[]>`select ${META(sql)} from credentials where id = ${id}`;
  return row ?? null;
}

export async function selectPassword(sql: Queryable, entityId: string) {
  const [row] = await sql<{ id: string; secret_hash: string }[]>`
    select id, secret_hash from credentials
    where entity_id = ${entityId} and kind = 'password' and status = 'active' and (expires_at is null or expires_at > now())
    order by created_at desc limit 1`;
  return row ?? null;
}

export async function insertCredential(sql: Queryable, c: {
  entityId: string; kind: string; secretHash: string | null; identifier?: string | null; scoped?: boolean;
  name?: string | null; description?: string | null; expiresAt?: Date | null; createdBy: string | null; id?: string;
}): Promise<{ id: string; created_at: Date }> {
  const [row] = await sql<{ id: string; created_at: Date }[]>`
    insert into credentials (id, entity_id, kind, secret_hash, identifier, scoped, name, description, expires_at, created_by)
    values (coalesce(${c.id ?? null}::uuid, gen_random_uuid()), ${c.entityId}, ${c.kind}, ${c.secretHash}, ${c.identifier ?? null},
      ${c.scoped ?? false}, ${c.name ?? null}, ${c.description ?? null}, ${c.expiresAt ?? null}, ${c.createdBy})
    returning id, created_at`;
  return row as { id: string; created_at: Date };
}

export async function updateSecretHash(sql: Queryable, id: string, hash: string): Promise<void> {
  await sql`update credentials set secret_hash = ${hash} where id = ${id}`;
}

export async function revokeCredentials(sql: Queryable, ids: string[], by: string | null, reason: string): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    update credentials set status = 'revoked', revoked_at = now(), revoked_by = ${by}, revocation_reason = ${reason}
    where id = any(${ids}::uuid[]) and status = 'active' returning id`;
  return rows.map((r) => r.id);
}

export async function listCredentials(sql: Queryable, entityId: string) {
  return sql<CredentialRow[]>`select ${META(sql)} from credentials where entity_id = ${entityId} order by created_at, id`;
}

export interface TokenState {
  secret_hash: string;
  status: string;
  expired: boolean;
  scoped: boolean;
  kind: string;
  entity_id: string;
  entity_kind: EntityKind;
  entity_status: string;
  entity_deleted: boolean;
  home_tenant_id: string | null;
  home_tenant_status: string | null;
}

/** An access token or shared key with its owner's state, for the online check. */
const TOKEN_STATE = (sql: Queryable) => sql`
  select c.id, c.secret_hash, c.status, (c.expires_at is not null and c.expires_at <= now()) as expired, c.scoped, c.kind,
    c.expires_at, e.id as entity_id, e.kind as entity_kind, e.status as entity_status, e.deleted_at is not null as entity_deleted,
    e.tenant_id as home_tenant_id, t.status as home_tenant_status
  from credentials c join entities e on e.id = c.entity_id left join tenants t on t.id = e.tenant_id`;

export async function selectAccessTokenState(sql: Queryable, credentialId: string) {
  const [row] = await sql<(TokenState & { id: string; expires_at: Date | null })[]>`
    ${TOKEN_STATE(sql)} where c.id = ${credentialId} and c.kind = 'access_token'`;
  return row ?? null;
}

export async function selectSharedKeyState(sql: Queryable, hash: string) {
  const [row] = await sql<(TokenState & { id: string; expires_at: Date | null })[]>`
    ${TOKEN_STATE(sql)} where c.secret_hash = ${hash} and c.kind = 'shared_key'`;
  return row ?? null;
}

/**
 * Writes a batch of last-use times. The rows are locked in id order first: every instance flushes its own
 * batch, and two batches locking the same keys' rows in plan order could each hold one the other waits on.
 */
export async function touchCredentials(sql: Queryable, used: { id: string; at: Date }[]): Promise<void> {
  if (used.length === 0) return;
  await sql`
    with u as (select * from unnest(${used.map((u) => u.id)}::uuid[], ${used.map((u) => u.at.toISOString())}::timestamptz[]) as u(id, at)),
    locked as materialized (
      select c.id from credentials c join u on u.id = c.id
      where c.last_used_at is null or c.last_used_at < u.at
      order by c.id for update of c)
    update credentials c set last_used_at = u.at
    from locked join u on u.id = locked.id
    where c.id = locked.id and (c.last_used_at is null or c.last_used_at < u.at)`;
}

// ---- access-token ceilings ----

export interface LimitRow {
  actions: string[];
  scope_mode: string;
  tenant_id: string | null;
  object_kind: string | null;
  object_type: string | null;
  object_id: string | null;
  conditions: Record<string, unknown>;
}

export async function insertLimits(sql: Queryable, credentialId: string, limits: LimitRow[]): Promise<void> {
  if (limits.length === 0) return;
  const rows = limits.map((l, position) => ({ ...l, position }));
  await sql`
    insert into credential_permission_limits (credential_id, actions, scope_mode, tenant_id, object_kind, object_type, object_id, conditions, position)
    select ${credentialId}, r.actions, r.scope_mode, r.tenant_id, r.object_kind, r.object_type, r.object_id, r.conditions, r.position
    from jsonb_to_recordset(${sql.json(rows as never)}) as r(
      actions text[], scope_mode text, tenant_id uuid, object_kind text, object_type text, object_id uuid, conditions jsonb, position int)`;
}

export async function deleteLimits(sql: Queryable, credentialId: string): Promise<void> {
  await sql`delete from credential_permission_limits where credential_id = ${credentialId}`;
}

export async function selectLimits(sql: Queryable, credentialIds: string[]) {
  return sql<(LimitRow & { credential_id: string })[]>`
    select credential_id, actions, scope_mode, tenant_id, object_kind, object_type, object_id, conditions
    from credential_permission_limits where credential_id = any(${credentialIds}::uuid[]) order by credential_id, position`;
}

export async function listAccessTokens(sql: Queryable, entityId: string, status: string | null, page: { limit: number; offset: number }) {
  const rows = await sql<(CredentialRow & { total: number })[]>`
    select ${META(sql)}, count(*) over ()::int as total from credentials
    where entity_id = ${entityId} and kind = 'access_token' and (${status}::text is null or status = ${status})
    order by created_at, id limit ${page.limit} offset ${page.offset}`;
  return rows;
}

export async function countAccessTokens(sql: Queryable, entityId: string, status: string | null): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from credentials
    where entity_id = ${entityId} and kind = 'access_token' and (${status}::text is null or status = ${status})`;
  return row?.n ?? 0;
}

export async function knownActions(sql: Queryable, names: string[]): Promise<Set<string>> {
  const rows = await sql<{ name: string }[]>`select name from actions where name = any(${names}::text[])`;
  return new Set(rows.map((r) => r.name));
}

// ---- signing keys and auth keys ----

export interface SigningKeyRow {
  kid: string;
  status: 'primary' | 'standby' | 'retired';
  public_jwk: Record<string, string>;
  private_key: Buffer;
  storage_mode: 'encrypted' | 'plaintext';
  key_encryption_key_id: string | null;
  created_at: Date;
  verify_until: Date | null;
}

/** Keys that still sign or verify: primary, standby, and retired ones whose tokens may still be live. */
export async function selectSigningKeys(sql: Queryable): Promise<SigningKeyRow[]> {
  return sql<SigningKeyRow[]>`
    select kid, status, public_jwk, private_key, storage_mode, key_encryption_key_id, created_at, verify_until
    from signing_keys where status <> 'retired' or verify_until > now() order by created_at`;
}

export async function selectAllSigningKeys(sql: Queryable): Promise<SigningKeyRow[]> {
  return sql<SigningKeyRow[]>`
    select kid, status, public_jwk, private_key, storage_mode, key_encryption_key_id, created_at, verify_until
    from signing_keys order by created_at`;
}

export async function insertSigningKey(sql: Queryable, k: {
  kid: string; status: string; publicJwk: Record<string, string>; privateKey: Buffer; storageMode: string; kekId: string | null;
}): Promise<void> {
  await sql`
    insert into signing_keys (kid, status, public_jwk, private_key, storage_mode, key_encryption_key_id)
    values (${k.kid}, ${k.status}, ${sql.json(k.publicJwk as never)}, ${k.privateKey}, ${k.storageMode}, ${k.kekId})`;
}

export async function updateSigningKeyStorage(sql: Queryable, kid: string, privateKey: Buffer, kekId: string): Promise<void> {
  await sql`update signing_keys set private_key = ${privateKey}, storage_mode = 'encrypted', key_encryption_key_id = ${kekId} where kid = ${kid}`;
}

export async function rotateSigningKeyRows(sql: Queryable, verifySecs: number): Promise<void> {
  await sql`
    update signing_keys set status = 'retired', retired_at = now(), verify_until = now() + make_interval(secs => ${verifySecs})
    where status = 'primary'`;
  await sql`update signing_keys set status = 'primary' where status = 'standby'`;
}

export async function selectAuthKey(sql: Queryable, name: string) {
  const [row] = await sql<{ material: Buffer; storage_mode: string; key_encryption_key_id: string | null }[]>`
    select material, storage_mode, key_encryption_key_id from auth_keys where name = ${name}`;
  return row ?? null;
}

export async function insertAuthKey(sql: Queryable, k: { name: string; material: Buffer; storageMode: string; kekId: string | null }) {
  await sql`
    insert into auth_keys (name, material, storage_mode, key_encryption_key_id)
    values (${k.name}, ${k.material}, ${k.storageMode}, ${k.kekId}) on conflict (name) do nothing`;
}

export async function updateAuthKeyStorage(sql: Queryable, name: string, material: Buffer, kekId: string): Promise<void> {
  await sql`update auth_keys set material = ${material}, storage_mode = 'encrypted', key_encryption_key_id = ${kekId} where name = ${name}`;
}

export async function lockAuthSetup(sql: Queryable): Promise<void> {
  // Instances starting together serialise here, so keys and the bootstrap password are created once.
  await sql`select pg_advisory_xact_lock(7346220)`;
}

export interface ExpiringFilter {
  days: number;
  entityId?: string;
  kind?: string;
}

/** Active credentials of live entities expiring after now and within `days` days, soonest first (index sql/0082). */
export async function listExpiring(sql: Queryable, f: ExpiringFilter, page: { limit: number; offset: number }) {
  return sql<CredentialRow[]>`
    select ${META(sql)} from credentials c
    where c.status = 'active' and c.expires_at > now() and c.expires_at <= now() + make_interval(days => ${f.days})
      ${f.entityId ? sql`and c.entity_id = ${f.entityId}` : sql``}
      ${f.kind ? sql`and c.kind = ${f.kind}` : sql``}
      and exists (select 1 from entities e where e.id = c.entity_id and e.deleted_at is null)
    order by c.expires_at, c.id
    limit ${page.limit} offset ${page.offset}`;
}
