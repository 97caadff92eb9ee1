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
