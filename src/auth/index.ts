// The auth domain's public face: createAuth wires keys, verification, sessions, login, signup,
// credentials and the runtime credential check (gRPC); other domains use authenticate,
// authenticateDeviceKey, verifyToken, authenticateCredential and invalidate from here.
//
// How the GraphQL context tells "no token" from "bad token": authenticate resolves null when the request
// carries no credential (public fields work; protected ones answer UNAUTHENTICATED 'missing
// authentication' through ctx.caller()), and REJECTS with UNAUTHENTICATED 'missing authentication' plus
// extensions.details.reason (invalid_token, expired_token, revoked_token, inactive_token) when a token
// was presented but is unusable, so a bad token never silently becomes an anonymous caller.
import type { AuditWriter } from '../audit/writer.js';
import type { Authz } from '../authz/types.js';
import type { Config } from '../config.js';
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import { forbidden, isAppError } from '../errors.js';
import type { GraphqlContext, Authenticate } from '../graphql/context.js';
import type { GraphqlModule } from '../graphql/schema.js';
import type { Health } from '../health/service.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { HttpServer } from '../http/server.js';
import type { HttpRequest } from '../http/types.js';
import type { Logger } from '../log.js';
import { createCredentialAuthority } from './authority.js';
import { bootstrapAdmin } from './bootstrap.js';
import { createCredentialCheck, type Admit, type CredentialMatch, type CredentialRequest } from './credential-check.js';
import { createCredentialService } from './credentials.js';
import { createDeviceKeys, type ClientPeer, type DeviceIdentity } from './device-keys.js';
import { createKeyring } from './keyring.js';
import { createLogin } from './login.js';
import { createLogMailer, type Mailer } from './mailer.js';
import { bearerToken, type PeekBearer } from './bearer.js';
import type { Principal } from './principal.js';
import { createExpiringCredentials } from './expiring.js';
import { authGraphqlModule } from './resolvers.js';
import { registerAuthRoutes } from './routes.js';
import { keyedHasher, type KeyedHash } from './secrets.js';
import { createSessions, type RequestMeta } from './sessions.js';
import { createSignup } from './signup.js';
import { createAddressThrottle } from './address-throttle.js';
import { createLoginThrottle, type LoginThrottle } from './login-throttle.js';
import { purgeOldLoginFailures } from './queries.js';
import { createTenantStates } from './tenant-states.js';
import { createVerifier, INVALIDATE_TOPIC, invalidToken, type AuthInvalidation, type Verified } from './verifier.js';

export type { AuthInvalidation, Verified } from './verifier.js';
export type { Admit, CredentialMatch, CredentialRequest } from './credential-check.js';
export { authGrpcService } from './grpc.js';
export type { ClientPeer, DeviceIdentity } from './device-keys.js';
export { principalOfDevice } from './device-keys.js';
export { createLogMailer, type Mailer, type MailMessage } from './mailer.js';
export type { Principal } from './principal.js';
export { THROTTLED_MESSAGE, type Admission, type LoginAttempt, type LoginThrottle } from './login-throttle.js';
// The credential-management rule (entity's owning tenant, never membership), for domains that issue credentials too.
export { createCredentialAuthority, type CredentialAuthority } from './authority.js';

export interface Auth {
  /** Boot work: keys created or loaded, the administrator's password bootstrapped. */
  init(): Promise<void>;
  authenticate: Authenticate;
  /**
   * authenticate for a listener that counts failed bearer tokens per client address (the enrollment
   * listener): a token not cached here waits out the address's hold; an unusable one counts against it.
   */
  authenticateFrom(headers: Record<string, string>, ip: string | null): Promise<Principal | null>;
  /** A bearer caller verified from this instance's cache, without waiting; undefined otherwise (then authenticate). */
  peekBearer: PeekBearer;
  /**
   * Device shared keys (HTTP `Authorization: Client <key>`, MQTT password, CoAP `?auth=`); null when
   * unknown, revoked or expired. `from` is the client (its peer address): a key not cached here is
   * looked up only after the address's hold, and a miss counts against it (address-throttle.ts).
   */
  authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null>;
  /** A device key's identity when this instance holds it verified already (no promise); undefined otherwise. */
  peekDeviceKey(key: string): DeviceIdentity | undefined;
  /** A bearer token's verdict (session JWT or access token), synchronous on a cache hit: gRPC callers. */
  verifyToken(token: string): Verified | Promise<Verified>;
  /**
   * A protocol adapter's check of someone else's password or shared key (gRPC AuthenticateCredential),
   * behind `admit`, the caller's gate for the tenant involved. Synchronous for a cached device key.
   */
  authenticateCredential(req: CredentialRequest, caller: Principal, admit: Admit, checkpoint: () => void, peer: string | null): CredentialMatch | Promise<CredentialMatch>;
  /** The same check when the holder presents its own credential from `ip` (EST Basic over the enrollment listener). */
  authenticateOwnCredential(req: CredentialRequest, transport: string, ip: string | null): Promise<CredentialMatch>;
  /**
   * The failed-credential throttle every credential check goes through (src/auth/login-throttle.ts):
   * admit({identity, ip}) before looking at the secret, then failed() or succeeded().
   */
  throttle: LoginThrottle;
  /**
   * For code that changes what a token stands for (entity status, deletion, tenant state): drops this
   * instance's cached verifications now and NOTIFYs the others. Triggers on entities, tenants, sessions
   * and credentials NOTIFY too; calling this makes the change visible here before the caller answers.
   */
  invalidate(change: AuthInvalidation): Promise<void>;
  graphqlModule(): GraphqlModule;
  registerRoutes(server: HttpServer): void;
  registerHealth(health: Health): void;
  close(): Promise<void>;
}

export interface AuthDeps {
  sql: Sql;
  hub: NotifyHub;
  audit: AuditWriter;
  authz: Authz;
  config: Config;
  log: Logger;
  limiter: RateLimiter;
  mailer?: Mailer;
  /**
   * The pool through a statement scope (db/statement-scope.ts) for credential management, which custom
   * endpoint calls may run and abandon; token verification, sessions and throttles keep `sql`: their
   * caches and batched writes serve every caller. Defaults to `sql`.
   */
  scopedSql?: Sql;
}

const COOKIE = 'svc_token';
const NO_PRINCIPAL: Promise<Principal | null> = Promise.resolve(null);

function parseCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

export function createAuth(deps: AuthDeps): Auth {
  const { sql, hub, audit, authz, config, log, limiter } = deps;
  const a = config.auth;
  const keyring = createKeyring({ sql, hub, kek: a.keyEncryptionKey, log });
  let hasher: KeyedHash | undefined;
  const hash = () => (hasher ??= keyedHasher(keyring.tokenHashKey()));
  const verifier = createVerifier({
    sql, hub, keyring, hash, log, jwt: { issuer: a.jwtIssuer, audience: a.jwtAudience },
    cache: { max: config.authRuntime.tokenCacheSize, ttlSecs: config.authRuntime.tokenCacheTtlSecs },
  });
  // Failed device keys and bearer tokens per client address, in memory (address-throttle.ts).
  const secretFailures = createAddressThrottle({
    addressKey: limiter.addressKey,
    settings: {
      addressLimit: config.authRuntime.loginFailureIpLimit, windowSecs: a.loginFailureWindowSecs,
      maxDelaySecs: config.authRuntime.loginFailureMaxDelaySecs, maxAddresses: 100_000,
    },
  });
  const deviceKeys = createDeviceKeys({
    sql, hub, hash, markUsed: verifier.markUsed, failures: secretFailures,
    cache: { max: config.authRuntime.deviceKeyCacheSize, ttlSecs: config.authRuntime.tokenCacheTtlSecs },
  });
  const sessions = createSessions({ sql, keyring, verifier, audit, jwt: { issuer: a.jwtIssuer, audience: a.jwtAudience, expirySecs: a.jwtExpirySecs } });
  // One throttle for every credential check (login here; EST Basic and gRPC AuthenticateCredential too).
  const throttle = createLoginThrottle({
    sql, addressKey: limiter.addressKey,
    settings: {
      pairLimit: a.loginFailureLimit, identityLimit: config.authRuntime.loginIdentifierFailureLimit,
      addressLimit: config.authRuntime.loginFailureIpLimit, windowSecs: a.loginFailureWindowSecs,
      maxDelaySecs: config.authRuntime.loginFailureMaxDelaySecs,
    },
  });
  const login = createLogin({
    sql, sessions, audit, authz, hash, log, throttle,
    settings: {
      scrypt: a.scrypt, emailVerificationRequired: a.emailVerificationRequired,
      allowUnverifiedEmailLogin: config.authRuntime.allowUnverifiedEmailLogin,
    },
  });
  const signup = createSignup({
    sql, audit, hash, log, mailer: deps.mailer ?? createLogMailer(log),
    settings: {
      enabled: a.selfRegistrationEnabled, verificationRequired: a.emailVerificationRequired, scrypt: a.scrypt,
      minPasswordChars: a.minPasswordChars, publicBaseUrl: config.publicBaseUrl, documents: config.documents,
    },
  });
  const tenantStates = createTenantStates({
    sql, hub, cache: { max: config.authRuntime.tenantCacheSize, ttlSecs: config.authRuntime.tokenCacheTtlSecs },
  });
  const credentialCheck = createCredentialCheck({
    sql, audit, deviceKeys, tenants: tenantStates,
    throttle,
    settings: {
      scrypt: a.scrypt, emailVerificationRequired: a.emailVerificationRequired,
      allowUnverifiedEmailLogin: config.authRuntime.allowUnverifiedEmailLogin,
    },
  });
  const dropLocal = (change: AuthInvalidation) => {
    verifier.dropLocal(change);
    deviceKeys.dropLocal(change);
    tenantStates.dropLocal(change);
  };
  const authority = createCredentialAuthority(authz);
  const credentials = createCredentialService({
    sql: deps.scopedSql ?? sql, audit, authz, authority, hash, invalidate: dropLocal,
    settings: { scrypt: a.scrypt, minPasswordChars: a.minPasswordChars, lists: config.lists, documents: config.documents },
  });
  const trustedOrigins = new Set([new URL(config.publicBaseUrl).origin, ...config.authRuntime.trustedOrigins.map((o) => new URL(o).origin)]);
  let usageTimer: NodeJS.Timeout | undefined;

  // Not async on purpose: the cache-hit path answers with one resolved promise and no extra microtasks.
  function authenticateHeaders(headers: Record<string, string>, safeMethod: boolean): Promise<Principal | null> {
    try {
      const token = presentedToken(headers, safeMethod);
      if (!token) return NO_PRINCIPAL;
      const result = verifier.verify(token);
      if (!(result instanceof Promise)) return result.ok ? Promise.resolve(result.principal) : Promise.reject(invalidToken(result.reason));
      return result.then((r) => {
        if (!r.ok) throw invalidToken(r.reason);
        return r.principal;
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  function peekBearer(headers: Record<string, string>): Principal | undefined {
    const token = headers.authorization === undefined ? null : bearerToken(headers.authorization);
    const verdict = token === null ? undefined : verifier.peek(token);
    return verdict?.ok ? verdict.principal : undefined;
  }

  /** Bearer header first; the session cookie only where a browser cannot be tricked into sending it. */
  function presentedToken(headers: Record<string, string>, safeMethod: boolean): string | null {
    let token: string | null = null;
    const header = headers.authorization;
    if (header !== undefined) {
      token = bearerToken(header);
      if (token === null) throw invalidToken('malformed');
    } else {
      token = parseCookie(headers.cookie, COOKIE);
      if (token && !safeMethod) {
        const origin = headers.origin ?? (headers.referer ? safeOrigin(headers.referer) : undefined);
        // Cross-site requests carry the cookie too: without a trusted Origin/Referer it is not used.
        if (!origin || !trustedOrigins.has(origin)) token = null;
      }
    }
    return token || null;
  }

  const meta = (ip: string, headers: Record<string, string>, requestId: string): RequestMeta => ({
    ip: ip ? limiter.clientIp(ip, headers) : null, userAgent: headers['user-agent'] ?? null, requestId,
  });

  async function mayViewSession(p: Principal, entityId: string): Promise<boolean> {
    return p.entityId === entityId || (await authz.isPlatformAdmin(p));
  }

  async function rotateSigningKeys(p: Principal, m: RequestMeta): Promise<void> {
    const scope = { kind: 'signing_key' as const, id: null, tenantId: null };
    if (!(await authz.decide(p, 'manage', scope)).allowed && !(await authz.decide(p, 'rotate', scope)).allowed) throw forbidden();
    // A retired key verifies as long as any token it signed may live, plus a minute for clock and NOTIFY lag.
    await keyring.rotate(a.jwtExpirySecs + 60);
    audit.record({ event: 'signing_key.rotate', outcome: 'allow', actorEntityId: p.entityId, targetKind: 'signing_key', targetId: keyring.signer().kid, requestId: m.requestId });
  }

  async function signingKeys(p: Principal) {
    const scope = { kind: 'signing_key' as const, id: null, tenantId: null };
    if (!(await authz.isPlatformAdmin(p)) && !(await authz.decide(p, 'read', scope)).allowed) throw forbidden();
    return keyring.keys();
  }

  const publicConfig = () => ({
    signup_enabled: a.selfRegistrationEnabled,
    self_registration_enabled: a.selfRegistrationEnabled,
    oauth_providers: [],
    email_verification_required: a.emailVerificationRequired,
    dev_allow_unverified_email_login: config.authRuntime.allowUnverifiedEmailLogin,
  });

  return {
    async init() {
      await keyring.init();
      await bootstrapAdmin(sql, {
        adminEntityId: config.authRuntime.adminEntityId, adminIdentifier: a.adminIdentifier, adminSecret: a.adminSecret,
        embedded: !config.database.url, scrypt: a.scrypt,
      }, log);
      await login.warmUp();
      let ticks = 0;
      usageTimer = setInterval(() => {
        verifier.flushUsage().catch((err: unknown) => log.warn('recording credential use failed', { err: String(err) }));
        // Closed failed-login windows are dead weight; any instance may sweep them (idempotent).
        if (++ticks % 20 === 0) {
          purgeOldLoginFailures(sql, a.loginFailureWindowSecs, config.authRuntime.loginFailureMaxKeys).catch((err: unknown) => log.warn('purging login failures failed', { err: String(err) }));
        }
      }, 30_000);
      usageTimer.unref();
    },
    authenticate: (headers) => authenticateHeaders(headers, false),
    peekBearer,
    authenticateFrom: async (headers, ip) => {
      // A token verified here before is no guess: it answers without waiting out the address's hold.
      if (peekBearer(headers) === undefined) await secretFailures.hold(ip);
      try {
        return await authenticateHeaders(headers, false);
      } catch (err) {
        if (isAppError(err) && err.kind === 'UNAUTHENTICATED') secretFailures.failed(ip);
        throw err;
      }
    },
    authenticateDeviceKey: (key, from) => deviceKeys.authenticate(key, from),
    peekDeviceKey: (key) => deviceKeys.peek(key),
    verifyToken: (token) => verifier.verify(token),
    authenticateCredential: (req, caller, admit, checkpoint, peer) => credentialCheck.authenticate(req, caller, admit, checkpoint, peer),
    authenticateOwnCredential: (req, transport, ip) => credentialCheck.authenticateSelf(req, { transport, ip }),
    throttle,
    async invalidate(change) {
      dropLocal(change);
      await hub.notify(INVALIDATE_TOPIC, change);
    },
    graphqlModule() {
      return authGraphqlModule({
        login, signup, sessions, credentials, mayViewSession, signingKeys, rotateSigningKeys,
        expiringCredentials: createExpiringCredentials({ sql, authz, lists: config.lists }),
        meta: (ctx: GraphqlContext) => meta(ctx.ip, ctx.headers, ctx.requestId),
      });
    },
    registerRoutes(server) {
      registerAuthRoutes(server, {
        login, signup, sessions, keyring, limiter, publicConfig, mayViewSession, rotateSigningKeys,
        bodyLimit: a.bodyLimitBytes,
        principalOf: (req: HttpRequest) => authenticateHeaders(req.headers, req.method === 'GET' || req.method === 'HEAD'),
        meta: (req: HttpRequest) => meta(req.ip, req.headers, req.requestId),
        cookie: { name: COOKIE, secure: config.publicBaseUrl.startsWith('https:'), maxAgeSecs: a.jwtExpirySecs },
      });
    },
    registerHealth(health) {
      health.register('signing_keys', () => {
        try {
          keyring.signer();
        } catch {
          return { status: 'error', message: 'no signing key loaded' };
        }
        return a.keyEncryptionKey
          ? { status: 'ok', message: 'signing keys loaded, sealed with SVC_KEY_ENCRYPTION_KEY' }
          : { status: 'ok', message: 'SVC_KEY_ENCRYPTION_KEY unset: signing keys stored in plaintext' };
      }, { critical: true });
      health.describe('signing_key_state', () => keyring.state());
    },
    async close() {
      if (usageTimer) clearInterval(usageTimer);
      await verifier.flushUsage().catch(() => undefined);
    },
  };
}

function safeOrigin(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}
