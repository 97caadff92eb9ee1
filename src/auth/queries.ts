// SQL of the auth domain: entities as login subjects, sessions, tenants for login context, failed-login
// counters, signup rows and email verification. Credential and key SQL is in credential-queries.ts.
import type { Queryable } from '../db/client.js';
import { isUuid } from '../validate.js';
import type { EntityKind } from './principal.js';

export interface LoginSubject {
  id: string;
  kind: EntityKind;
  name: string;
  tenant_id: string | null;
  status: string;
  email: string | null;
  email_verified: boolean;
}

/** Two or more humans claim an e-mail address in their attributes and no tenant tells them apart. */
export const AMBIGUOUS_LOGIN = 'ambiguous' as const;

/**
 * Resolves a login identifier among live entities: a UUID is the id, anything with '@' an email, else
 * an alias or a name. Names and aliases are unique per tenant only: with a tenant context, the tenant's
 * entity wins over a global one; more than one candidate resolves to nothing rather than a guess.
 * An email is a registered address (signup, invitation, bootstrap) first; failing that, the address a
 * human created through createEntity holds in attributes.email (any case, trimmed), which a tenant
 * context narrows to the humans belonging to it; several and no tenant given: AMBIGUOUS_LOGIN.
 */
export async function findLoginSubject(sql: Queryable, identifier: string, tenantId: string | null): Promise<LoginSubject | typeof AMBIGUOUS_LOGIN | null> {
  const columns = sql`e.id, e.kind, e.name, e.tenant_id, e.status, m.email, (m.verified_at is not null) as email_verified`;
  let rows: LoginSubject[];
  if (isUuid(identifier)) {
    rows = await sql<LoginSubject[]>`
      select ${columns} from entities e left join entity_emails m on m.entity_id = e.id
      where e.id = ${identifier.toLowerCase()} and e.deleted_at is null`;
  } else if (identifier.includes('@')) {
    const email = identifier.toLowerCase();
    rows = await sql<LoginSubject[]>`
      select ${columns} from entity_emails m join entities e on e.id = m.entity_id
      where m.email = ${email} and e.deleted_at is null`;
    if (rows.length === 0) return findByAttributeEmail(sql, email, tenantId);
  } else {
    rows = await sql<LoginSubject[]>`
      select ${columns} from entities e left join entity_emails m on m.entity_id = e.id
      where e.deleted_at is null and (e.name = ${identifier} or lower(e.alias) = ${identifier.toLowerCase()})
        and (e.tenant_id is null or e.tenant_id = ${tenantId})
      order by (e.tenant_id is null)
      limit 3`;
    if (rows.length > 1 && tenantId !== null) rows = rows.filter((r) => r.tenant_id === tenantId);
  }
  return rows.length === 1 ? (rows[0] as LoginSubject) : null;
}

/** Live humans without a registered address whose attributes.email is this (lowercase, trimmed) address. */
async function findByAttributeEmail(sql: Queryable, email: string, tenantId: string | null): Promise<LoginSubject | typeof AMBIGUOUS_LOGIN | null> {
  // The expression matches the index entities__human_attribute_email (sql/0080).
  const rows = await sql<(LoginSubject & { in_tenant: boolean })[]>`
    select e.id, e.kind, e.name, e.tenant_id, e.status, null::text as email, false as email_verified,
      ${tenantId === null ? sql`false` : belongsExpression(sql, tenantId)} as in_tenant
    from entities e
    where e.kind = 'human' and e.deleted_at is null and lower(btrim(e.attributes->>'email')) = ${email}
      and not exists (select 1 from entity_emails m where m.entity_id = e.id)
    order by e.created_at, e.id
    limit 10`;
  if (rows.length <= 1) return rows[0] ? subjectOf(rows[0]) : null;
  if (tenantId === null) return AMBIGUOUS_LOGIN;
  const inTenant = rows.filter((r) => r.in_tenant);
  // Several in the tenant too: no guess (the name or id still identifies each).
  return inTenant.length === 1 ? subjectOf(inTenant[0]!) : null;
}

function subjectOf(r: LoginSubject & { in_tenant: boolean }): LoginSubject {
  return { id: r.id, kind: r.kind, name: r.name, tenant_id: r.tenant_id, status: r.status, email: r.email, email_verified: r.email_verified };
}

/** Home tenant, active membership, or a role assignment there (direct or through a principal group), for entity `e`. */
function belongsExpression(sql: Queryable, tenantId: string) {
  return sql`(e.tenant_id = ${tenantId}
    or exists (select 1 from tenant_memberships tm where tm.tenant_id = ${tenantId} and tm.entity_id = e.id and tm.status = 'active')
    or exists (
      select 1 from role_assignments ra
      where ra.tenant_id = ${tenantId}
        and (ra.entity_id = e.id or ra.group_id in (select group_id from principal_group_members where entity_id = e.id))))`;
}

export interface EntityRow {
  id: string;
  kind: EntityKind;
  name: string;
  tenant_id: string | null;
  status: string;
  deleted: boolean;
}

export async function selectEntity(sql: Queryable, id: string): Promise<EntityRow | null> {
  const [row] = await sql<EntityRow[]>`
    select id, kind, name, tenant_id, status, deleted_at is not null as deleted from entities where id = ${id}`;
  return row ?? null;
}

export async function selectTenant(sql: Queryable, by: { id?: string | null; alias?: string | null }) {
  const [row] = by.id
    ? await sql<{ id: string; status: string }[]>`select id, status from tenants where id = ${by.id}`
    : await sql<{ id: string; status: string }[]>`
        select id, status from tenants where lower(alias) = ${(by.alias ?? '').toLowerCase()} and deleted_at is null`;
  return row ?? null;
}

/** Whether the entity may take a tenant as its session context: home tenant, membership or a grant there. */
export async function belongsToTenant(sql: Queryable, entityId: string, tenantId: string): Promise<boolean> {
  const [row] = await sql<{ ok: boolean }[]>`select ${belongsExpression(sql, tenantId)} as ok from entities e where e.id = ${entityId}`;
  return row?.ok ?? false;
}

// ---- sessions ----

export async function insertSession(sql: Queryable, s: {
  entityId: string; tenantId: string | null; credentialKind: string; ip: string | null; userAgent: string | null; ttlSecs: number;
}) {
  const [row] = await sql<{ id: string; created_at: Date; expires_at: Date }[]>`
    insert into sessions (entity_id, tenant_id, credential_kind, ip, user_agent, expires_at)
    values (${s.entityId}, ${s.tenantId}, ${s.credentialKind}, ${s.ip}, ${s.userAgent}, now() + make_interval(secs => ${s.ttlSecs}))
    returning id, created_at, expires_at`;
  return row as { id: string; created_at: Date; expires_at: Date };
}

export interface SessionState {
  entity_id: string;
  tenant_id: string | null;
  expires_at: Date;
  revoked: boolean;
  entity_kind: EntityKind;
  entity_status: string;
  entity_deleted: boolean;
  home_tenant_id: string | null;
  home_tenant_status: string | null;
  tenant_status: string | null;
}

/** Everything the online check of a session token needs, in one round trip. */
export async function selectSessionState(sql: Queryable, sessionId: string): Promise<SessionState | null> {
  const [row] = await sql<SessionState[]>`
    select s.entity_id, s.tenant_id, s.expires_at, s.revoked_at is not null as revoked,
      e.kind as entity_kind, e.status as entity_status, e.deleted_at is not null as entity_deleted,
      e.tenant_id as home_tenant_id, ht.status as home_tenant_status, st.status as tenant_status
    from sessions s
    join entities e on e.id = s.entity_id
    left join tenants ht on ht.id = e.tenant_id
    left join tenants st on st.id = s.tenant_id
    where s.id = ${sessionId}`;
  return row ?? null;
}

export async function selectSession(sql: Queryable, id: string) {
  const [row] = await sql<{ id: string; entity_id: string; tenant_id: string | null; expires_at: Date; revoked_at: Date | null; created_at: Date }[]>`
    select id, entity_id, tenant_id, expires_at, revoked_at, created_at from sessions where id = ${id}`;
  return row ?? null;
}

export async function revokeSession(sql: Queryable, id: string, reason: string): Promise<boolean> {
  const rows = await sql`update sessions set revoked_at = now(), revoked_reason = ${reason} where id = ${id} and revoked_at is null returning id`;
  return rows.length > 0;
}

export async function extendSession(sql: Queryable, id: string, ttlSecs: number): Promise<Date | null> {
  const [row] = await sql<{ expires_at: Date }[]>`
    update sessions set expires_at = now() + make_interval(secs => ${ttlSecs})
    where id = ${id} and revoked_at is null and expires_at > now() returning expires_at`;
  return row?.expires_at ?? null;
}

// ---- failed logins ----

export interface LoginFailureRow {
  key: string;
  /** Failures in the key's open window (0 once the window closed). */
  failures: number;
  windowStartedMs: number;
  lastFailedMs: number;
  /** The database's clock, so every instance judges by one. */
  nowMs: number;
}

/**
 * The keys' counters, locked FOR UPDATE in key order (one order everywhere: concurrent attempts queue
 * instead of deadlocking), created at zero when missing. A window opens at its first failure; a closed
 * one reads as zero failures.
 */
export async function lockLoginFailures(sql: Queryable, keys: string[], windowSecs: number): Promise<LoginFailureRow[]> {
  const sorted = [...keys].sort();
  await sql`
    insert into auth_login_failures (key, failures, window_started_at, last_failed_at)
    select k, 0, now(), now() from unnest(${sorted}::text[]) with ordinality as u(k, n) order by n
    on conflict (key) do nothing`;
  return sql<LoginFailureRow[]>`
    select key,
      case when window_started_at > now() - make_interval(secs => ${windowSecs}) then failures else 0 end as failures,
      (extract(epoch from window_started_at) * 1000)::float8 as "windowStartedMs",
      (extract(epoch from last_failed_at) * 1000)::float8 as "lastFailedMs",
      (extract(epoch from now()) * 1000)::float8 as "nowMs"
    from auth_login_failures where key = any(${sorted}) order by key for update`;
}

/**
 * Counts one attempt on each key (a closed window starts afresh). Only keys this transaction locked
 * (lockLoginFailures' rows): taking another row here would lock out of key order while holding the rest.
 */
export async function countLoginAttempt(sql: Queryable, lockedKeys: string[], windowSecs: number): Promise<void> {
  await sql`
    update auth_login_failures as f set
      failures = case when f.window_started_at > now() - make_interval(secs => ${windowSecs}) then f.failures + 1 else 1 end,
      window_started_at = case when f.window_started_at > now() - make_interval(secs => ${windowSecs}) then f.window_started_at else now() end,
      last_failed_at = now()
    where key = any(${lockedKeys})`;
}

/**
 * A right secret: its identity's counters start afresh, and the attempt counted on the address is taken
 * back. Counters are set to zero, not deleted, so an attempt whose lock waited on one locks it once this
 * commits (a row deleted under a waiting FOR UPDATE drops out of it, uncounted); the sweep removes
 * zeros. Each statement takes its rows in key order, as an attempt does: a scan in table order could
 * hold a later key while waiting on an earlier one an attempt holds, a deadlock.
 */
export async function forgiveLoginAttempt(sql: Queryable, clear: string[], uncount: string[]): Promise<void> {
  if (clear.length) {
    await sql`
      with locked as materialized (select key from auth_login_failures where key = any(${clear}) order by key for update)
      update auth_login_failures as f set failures = 0, window_started_at = now() from locked where f.key = locked.key`;
  }
  if (uncount.length) {
    await sql`
      with locked as materialized (select key from auth_login_failures where key = any(${uncount}) order by key for update)
      update auth_login_failures as f set failures = greatest(f.failures - 1, 0) from locked where f.key = locked.key`;
  }
}

/**
 * Drops closed windows and counters back at zero; then, while more than maxKeys are left (callers from
 * ever new addresses or identifiers), those with the fewest failures, least recent first: a dropped
 * one-failure counter gives its holder one more free try, while the counters that hold anyone back
 * cost an attacker the failures they hold to push out. Counters an attempt holds are skipped, never
 * waited on: the sweep neither delays a login nor deadlocks with one; the next sweep takes them.
 */
export async function purgeOldLoginFailures(sql: Queryable, windowSecs: number, maxKeys: number): Promise<void> {
  await sql`
    with stale as materialized (
      select key from auth_login_failures
      where window_started_at < now() - make_interval(secs => ${windowSecs}) or failures = 0
      for update skip locked)
    delete from auth_login_failures as f using stale where f.key = stale.key`;
  await sql`
    with surplus as materialized (
      select key from auth_login_failures order by failures desc, last_failed_at desc offset ${maxKeys}
      for update skip locked)
    delete from auth_login_failures as f using surplus where f.key = surplus.key`;
}

// ---- signup and email verification ----

export async function insertHuman(sql: Queryable, h: { name: string; attributes: Record<string, unknown> }): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into entities (kind, name, tenant_id, attributes) values ('human', ${h.name}, null, ${sql.json(h.attributes as never)})
    returning id`;
  return (row as { id: string }).id;
}

export async function insertEmail(sql: Queryable, entityId: string, email: string, verified: boolean): Promise<void> {
  await sql`insert into entity_emails (entity_id, email, verified_at) values (${entityId}, ${email}, ${verified ? new Date() : null})`;
}

export async function addToPrincipalGroup(sql: Queryable, groupId: string, entityId: string): Promise<void> {
  await sql`insert into principal_group_members (group_id, entity_id) values (${groupId}, ${entityId}) on conflict do nothing`;
}

export async function insertVerificationToken(sql: Queryable, t: { hash: string; entityId: string; email: string; ttlSecs: number }) {
  await sql`
    insert into email_verification_tokens (token_hash, entity_id, email, expires_at)
    values (${t.hash}, ${t.entityId}, ${t.email}, now() + make_interval(secs => ${t.ttlSecs}))`;
}

/** Marks the token used and the email verified, in one statement; null when unknown, used or expired. */
export async function consumeVerificationToken(sql: Queryable, hash: string) {
  const [row] = await sql<{ entity_id: string; email: string }[]>`
    with t as (
      update email_verification_tokens set used_at = now()
      where token_hash = ${hash} and used_at is null and expires_at > now()
      returning entity_id, email)
    update entity_emails m set verified_at = coalesce(m.verified_at, now())
    from t where m.entity_id = t.entity_id and m.email = t.email
    returning m.entity_id, m.email`;
  return row ?? null;
}

export async function selectUnverifiedEmail(sql: Queryable, email: string) {
  const [row] = await sql<{ entity_id: string; email: string }[]>`
    select m.entity_id, m.email from entity_emails m join entities e on e.id = m.entity_id
    where m.email = ${email} and m.verified_at is null and e.deleted_at is null`;
  return row ?? null;
}
