// REST routes of the auth domain (INTERFACES.md section 3): public config, signup, login, logout,
// introspection, session, key rotation, email verification and the JWKS; per-IP limits by category.
import { invalidInput, unauthenticated } from '../errors.js';
import { jsonObject, jsonText } from '../http/json-body.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { HttpServer } from '../http/server.js';
import { empty, json, searchParams, type HttpRequest } from '../http/types.js';
import type { Login } from './login.js';
import type { Principal } from './principal.js';
import type { RequestMeta, Sessions } from './sessions.js';
import type { Signup } from './signup.js';
import type { Keyring } from './keyring.js';

export interface AuthRouteDeps {
  login: Login;
  signup: Signup;
  sessions: Sessions;
  keyring: Keyring;
  limiter: RateLimiter;
  bodyLimit: number;
  publicConfig: () => Record<string, unknown>;
  /** The caller of a REST request; cookies are accepted on safe methods and from trusted origins. */
  principalOf(req: HttpRequest): Promise<Principal | null>;
  meta(req: HttpRequest): RequestMeta;
  mayViewSession(p: Principal, entityId: string): Promise<boolean>;
  rotateSigningKeys(p: Principal, meta: RequestMeta): Promise<void>;
  cookie: { name: string; secure: boolean; maxAgeSecs: number };
}

// The headers these routes read (the HTTP layer passes only what a route names).
const HEADERS = ['authorization', 'content-type', 'content-length', 'x-request-id', 'x-forwarded-for', 'cookie', 'origin', 'referer', 'user-agent'];

/** An empty body reads as {}: these routes' fields are all optional or checked one by one. */
const readJson = (req: HttpRequest): Record<string, unknown> => jsonObject(jsonText(req) || '{}');

const str = (v: unknown, name: string): string | null => {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw invalidInput(`${name} must be a string`);
  return v;
};

export function registerAuthRoutes(server: HttpServer, d: AuthRouteDeps): void {
  const { limiter } = d;
  // Variables, not literals: route options grow fields (headers) that older HttpServer typings lack.
  const plain = { headers: HEADERS };
  const withBody = { bodyLimit: d.bodyLimit, headers: HEADERS };
  const noStore = { 'cache-control': 'no-store' };
  const requireCaller = async (req: HttpRequest) => {
    const p = await d.principalOf(req);
    if (!p) throw unauthenticated();
    return p;
  };
  const cookie = (value: string, maxAge: number) =>
    `${d.cookie.name}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${d.cookie.secure ? '; Secure' : ''}`;

  server.route('GET', '/.well-known/jwks.json', limiter.wrap('public_routes', () =>
    json(200, d.keyring.jwks(), { 'cache-control': 'public, max-age=300' })), plain);

  server.route('GET', '/auth/public-config', limiter.wrap('auth_routes', () => json(200, d.publicConfig())), plain);

  server.route('POST', '/auth/signup', limiter.wrap('auth_routes', async (req) => {
    const body = readJson(req);
    const out = await d.signup.signup({
      name: str(body.name, 'name'), email: str(body.email, 'email'), password: str(body.password, 'password'), attributes: body.attributes,
    }, d.meta(req));
    return json(202, { entity_id: out.entityId, email: out.email, verification_required: out.verificationRequired });
  }), withBody);

  server.route('POST', '/auth/login', limiter.wrap('auth_routes', async (req) => {
    const body = readJson(req);
    const out = await d.login.login({
      identifier: str(body.identifier, 'identifier'), secret: str(body.secret, 'secret'), kind: str(body.kind, 'kind'),
      tenantId: str(body.tenant_id ?? body.tenantId, 'tenant_id'), tenantAlias: str(body.tenant_alias ?? body.tenantAlias, 'tenant_alias'),
    }, d.meta(req));
    return json(200, {
      token: out.token, entity_id: out.entityId, session_id: out.sessionId, tenant_id: out.tenantId, expires_at: out.expiresAt,
      email_verified: out.emailVerified, verification_required: out.verificationRequired,
      access_token: out.token, access_token_expires_at: out.expiresAt,
    }, { ...noStore, 'set-cookie': cookie(out.token, d.cookie.maxAgeSecs) });
  }), withBody);

  server.route('POST', '/auth/logout', limiter.wrap('admin_routes', async (req) => {
    // An expired or revoked token still gets its cookie cleared: logging out never fails.
    const p = await d.principalOf(req).catch(() => null);
    if (p) await d.sessions.logout(p, d.meta(req));
    return json(200, { authenticated: false }, { 'set-cookie': cookie('', 0) });
  }), withBody);

  server.route('GET', '/auth/introspect', limiter.wrap('admin_routes', async (req) => {
    if (!req.headers.authorization) throw unauthenticated();
    let p: Principal | null;
    try {
      p = await d.principalOf(req);
    } catch {
      p = null;
    }
    if (!p) return json(200, { active: false }, noStore);
    return json(200, { active: true, entity_id: p.entityId, tenant_id: p.tenantId, session_id: p.sessionId, scoped: p.scoped }, noStore);
  }), plain);

  server.route('GET', '/auth/session', limiter.wrap('admin_routes', async (req) => {
    let p: Principal | null;
    try {
      p = await d.principalOf(req);
    } catch {
      p = null;
    }
    if (!p) return json(200, { authenticated: false }, noStore);
    const s = p.sessionId ? await d.sessions.get(p.sessionId) : null;
    return json(200, {
      authenticated: true,
      session: { entityId: p.entityId, tenantId: p.tenantId, sessionId: p.sessionId, expiresAt: s ? s.expires_at.toISOString() : null },
    }, noStore);
  }), plain);

  server.route('GET', '/auth/sessions/:id', limiter.wrap('admin_routes', async (req) => {
    const p = await requireCaller(req);
    const id = req.params[0] ?? '';
    const s = /^[0-9a-f-]{36}$/i.test(id) ? await d.sessions.get(id) : null;
    if (!s || !(await d.mayViewSession(p, s.entity_id))) return json(404, { error: 'session not found' });
    return json(200, {
      id: s.id, entity_id: s.entity_id, tenant_id: s.tenant_id, expires_at: s.expires_at.toISOString(),
      revoked_at: s.revoked_at ? s.revoked_at.toISOString() : null, created_at: s.created_at.toISOString(),
    }, noStore);
  }), plain);

  server.route('POST', '/auth/keys/rotate', limiter.wrap('admin_routes', async (req) => {
    await d.rotateSigningKeys(await requireCaller(req), d.meta(req));
    return empty(204);
  }), withBody);

  const verify = async (req: HttpRequest, token: string | null) => {
    await d.signup.verifyEmail(token ?? '', d.meta(req));
    return json(200, { verified: true });
  };
  server.route('GET', '/auth/email/verify', limiter.wrap('auth_routes', (req) => verify(req, searchParams(req).get('token'))), plain);
  server.route('POST', '/auth/email/verify', limiter.wrap('auth_routes', (req) => verify(req, str(readJson(req).token, 'token'))),
    withBody);
  server.route('POST', '/auth/email/resend', limiter.wrap('auth_routes', async (req) => {
    await d.signup.resendVerification(str(readJson(req).email, 'email') ?? '');
    return json(202, { accepted: true });
  }), withBody);
}
