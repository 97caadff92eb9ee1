// Authentication for black-box tests: a known administrator secret passed as env, admin and per-entity
// session tokens obtained through the public GraphQL API (createPassword by the admin, then login).
import { randomBytes } from 'node:crypto';
import { gql, startTestService, type TestService } from './service.js';

/** The administrator's password in every service started with AUTH_ENV. */
export const ADMIN_SECRET = 'test-admin-secret-0123456789';
export const ADMIN_ID = '00000000-0000-0000-0000-000000000001';

/**
 * Env for startTestService: the admin secret, and scrypt at its cheapest allowed cost so the many
 * logins of a test file stay fast (the benchmark measures the real parameters).
 */
export const AUTH_ENV: Record<string, string> = { SVC_ADMIN_SECRET: ADMIN_SECRET, SVC_SCRYPT_COST: '1024' };

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** startTestService with AUTH_ENV (extra env wins). */
export function startAuthService(t: Teardown, env: Record<string, string> = {}): Promise<TestService> {
  return startTestService(t, { ...AUTH_ENV, ...env });
}

const LOGIN = `mutation ($input: LoginInput!) { login(input: $input) { token entityId sessionId tenantId expiresAt } }`;

export interface LoginOptions {
  kind?: 'password' | 'shared_key';
  tenantId?: string;
  tenantAlias?: string;
}

/** Logs in through GraphQL; throws with the server's message when refused. */
export async function login(ts: TestService, identifier: string, secret: string, options: LoginOptions = {}) {
  const res = await gql(ts.url(), LOGIN, { input: { identifier, secret, ...options } });
  if (res.body.errors || !res.body.data?.login) throw new Error(`login of ${identifier} failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data.login as { token: string; entityId: string; sessionId: string; tenantId: string | null; expiresAt: string };
}

const adminTokens = new WeakMap<TestService, Promise<string>>();

/** A session token of the platform administrator (one login per service). */
export function adminToken(ts: TestService): Promise<string> {
  let token = adminTokens.get(ts);
  if (!token) {
    token = login(ts, 'admin', ADMIN_SECRET).then((l) => l.token);
    adminTokens.set(ts, token);
  }
  return token;
}

/** Sets a password on an existing entity as the administrator, through createPassword. */
export async function setPassword(ts: TestService, entityId: string, password: string): Promise<void> {
  const res = await gql(ts.url(), `mutation ($id: ID!, $pw: String!) { createPassword(entityId: $id, password: $pw) }`,
    { id: entityId, pw: password }, await adminToken(ts));
  if (res.body.data?.createPassword !== true) throw new Error(`createPassword for ${entityId} failed: ${JSON.stringify(res.body.errors)}`);
}

/**
 * A session token for an existing entity: the admin gives it a fresh random password, then it logs in
 * by id. Pass tenantId to log into a workspace (the entity must belong to it).
 */
export async function tokenFor(ts: TestService, entityId: string, options: LoginOptions = {}): Promise<string> {
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await setPassword(ts, entityId, password);
  return (await login(ts, entityId, password, options)).token;
}

/** An access token (`svc_...`) owned by the caller of `token`; scoped when permissions are given. */
export async function accessTokenFor(ts: TestService, token: string, permissions?: unknown[], extra: Record<string, unknown> = {}) {
  const res = await gql(ts.url(), `mutation ($input: CreateAccessTokenInput!) { createAccessToken(input: $input) { credentialId token } }`,
    { input: { name: 'test token', scoped: permissions !== undefined, permissions: permissions ?? [], ...extra } }, token);
  if (!res.body.data?.createAccessToken) throw new Error(`createAccessToken failed: ${JSON.stringify(res.body.errors)}`);
  return res.body.data.createAccessToken as { credentialId: string; token: string };
}

// ---- SQL fixtures: tenants, entities and grants written directly, so auth tests do not depend on the
// management API of other domains. ----

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
