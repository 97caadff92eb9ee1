// Bearer verification for every request: session JWTs and access tokens, with online checks (session
// live, entity active and not deleted, tenant active) and a verified-token cache that is dropped by
// NOTIFY on every instance, so the common path runs no SQL and a revoked token is never accepted.
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import { AppError } from '../errors.js';
import { createIndexedLru } from '../indexed-lru.js';
import type { Logger } from '../log.js';
import * as cq from './credential-queries.js';
import { peekKid, verifyJwt } from './jwt.js';
import type { Keyring } from './keyring.js';
import type { Principal } from './principal.js';
import * as q from './queries.js';
import { parseAccessToken, sameHash, type KeyedHash } from './secrets.js';

export const INVALIDATE_TOPIC = 'auth.invalidate';
/**
 * lru-cache re-reads the clock at most this often for its TTL, with one timer each time; the default
 * (1 ms) set a timer per millisecond under load. The TTL only bounds how long a verdict is reused (the
 * token's own expiry is checked exactly, invalidation drops entries at once), so a second is plenty.
 */
export const TTL_RESOLUTION_MS = 1000;

/** What changed: cached verifications that depend on any of these are dropped. */
export interface AuthInvalidation {
  sessions?: string[];
  credentials?: string[];
  entities?: string[];
  tenants?: string[];
  all?: boolean;
}

export type VerifyFailure = 'malformed' | 'invalid' | 'expired' | 'revoked' | 'inactive';

export type Verified = { ok: true; principal: Principal; expiresAt: Date | null } | { ok: false; reason: VerifyFailure };

interface Entry {
  /** The whole token: the cache key is only its tail, so a hit is confirmed by equality. */
  token: string;
  principal: Principal;
  expiresAt: Date | null;
  /** The tenants the verdict read: the entity's home tenant and the session's tenant. */
  tenants: (string | null)[];
}

export interface Verifier {
  /** Synchronous on a cache hit (no promise, no microtask on the common path), a promise on a miss. */
  verify(token: string): Verified | Promise<Verified>;
  /** The cached verdict only: undefined when the token is not cached (nothing is loaded). */
  peek(token: string): Verified | undefined;
  /** Drops local cache entries now (callers also NOTIFY so other instances do the same). */
  dropLocal(change: AuthInvalidation): void;
  /** Notes a credential in use; last_used_at is written in batches by flushUsage, never per request. */
  markUsed(credentialId: string): void;
  flushUsage(): Promise<void>;
  readonly stats: { hits: number; misses: number; size: number };
}

const ACTIVE_TENANT = (status: string | null) => status === null || status === 'active';

export function createVerifier(deps: {
  sql: Sql; hub: NotifyHub; keyring: Keyring; hash: () => KeyedHash; log: Logger;
  jwt: { issuer: string; audience: string }; cache: { max: number; ttlSecs: number };
}): Verifier {
  const { sql, hub, keyring, log } = deps;
  const { cache, drop } = createIndexedLru<Entry>({
    max: deps.cache.max, ttl: deps.cache.ttlSecs * 1000, ttlAutopurge: false, ttlResolution: TTL_RESOLUTION_MS,
    refsOf: ({ principal: p, tenants }) => [p.sessionId, p.credentialId, p.entityId, ...tenants].filter((id): id is string => id !== null),
  });
  const used = new Map<string, number>();
  // Bumped by every invalidation: a verdict loaded while one happened is answered but not cached.
  let generation = 0;
  let hits = 0;
  let misses = 0;
  let reloadingKeys: Promise<void> | undefined;
  let lastReload = 0;

  function dropLocal(change: AuthInvalidation): void {
    generation++;
    if (change.all) return cache.clear();
    drop([...(change.sessions ?? []), ...(change.credentials ?? []), ...(change.entities ?? []), ...(change.tenants ?? [])]);
  }

  hub.subscribe(INVALIDATE_TOPIC, (payload) => dropLocal((payload ?? { all: true }) as AuthInvalidation));
  // Notifications may have been missed while LISTEN was down: nothing cached can be trusted.
  hub.onReconnect(() => dropLocal({ all: true }));

  /** A kid we do not know may come from a rotation on another instance whose NOTIFY is still in flight. */
  async function keyFor(kid: string) {
    const key = keyring.verificationKey(kid);
    if (key || Date.now() - lastReload < 5000) return key;
    lastReload = Date.now();
    reloadingKeys ??= keyring.reload().finally(() => {
      reloadingKeys = undefined;
    });
    await reloadingKeys.catch((err: unknown) => log.error('reloading signing keys failed', { err }));
    return keyring.verificationKey(kid);
  }

  async function verifySession(token: string): Promise<Verified & { tenants?: (string | null)[] }> {
    const now = Math.floor(Date.now() / 1000);
    const expect = { iss: deps.jwt.issuer, aud: deps.jwt.audience, now };
    let result = verifyJwt(token, (k) => keyring.verificationKey(k), expect);
    if (!result.ok && result.reason === 'unknown_key') {
      const wanted = peekKid(token);
      if (wanted && (await keyFor(wanted))) result = verifyJwt(token, (k) => keyring.verificationKey(k), expect);
    }
    if (!result.ok) return { ok: false, reason: result.reason === 'expired' ? 'expired' : result.reason === 'malformed' ? 'malformed' : 'invalid' };
    const { claims } = result;
    const s = await q.selectSessionState(sql, claims.sid);
    if (!s || s.entity_id !== claims.sub || (s.tenant_id ?? null) !== claims.tid) return { ok: false, reason: 'invalid' };
    if (s.revoked) return { ok: false, reason: 'revoked' };
    if (s.expires_at.getTime() <= Date.now()) return { ok: false, reason: 'expired' };
    if (s.entity_deleted || s.entity_status !== 'active' || s.home_tenant_status === 'deleted' || !ACTIVE_TENANT(s.tenant_status)) {
      return { ok: false, reason: 'inactive' };
    }
    // The JWT's exp bounds the verdict; a refreshed session gets a new token, so the shorter one wins.
    const expiresAt = new Date(Math.min(claims.exp * 1000, s.expires_at.getTime()));
    return {
      ok: true,
      expiresAt,
      tenants: [s.home_tenant_id, s.tenant_id],
      principal: {
        entityId: s.entity_id, entityKind: s.entity_kind, homeTenantId: s.home_tenant_id, tenantId: s.tenant_id,
        sessionId: claims.sid, credentialId: null, credentialKind: 'session', scoped: false,
      },
    };
  }

  async function verifyAccessToken(token: string): Promise<Verified & { tenants?: (string | null)[] }> {
    const parsed = parseAccessToken(token);
    if (!parsed) return { ok: false, reason: 'malformed' };
    const row = await cq.selectAccessTokenState(sql, parsed.credentialId);
    if (!row || !sameHash(deps.hash()(parsed.secret), row.secret_hash)) return { ok: false, reason: 'invalid' };
    if (row.status !== 'active') return { ok: false, reason: 'revoked' };
    if (row.expired) return { ok: false, reason: 'expired' };
    if (row.entity_deleted || row.entity_status !== 'active' || row.home_tenant_status === 'deleted') return { ok: false, reason: 'inactive' };
    return {
      ok: true,
      expiresAt: row.expires_at,
      tenants: [row.home_tenant_id],
      principal: {
        entityId: row.entity_id, entityKind: row.entity_kind, homeTenantId: row.home_tenant_id, tenantId: null,
        sessionId: null, credentialId: row.id, credentialKind: 'access_token', scoped: row.scoped,
      },
    };
  }

  async function load(token: string, key: string): Promise<Verified> {
    const before = generation;
    const result = token.startsWith('svc_') ? await verifyAccessToken(token) : await verifySession(token);
    if (!result.ok) return { ok: false, reason: result.reason };
    if (result.principal.credentialId) used.set(result.principal.credentialId, Date.now());
    // Only a verdict no invalidation raced with, and only while notifications are flowing, is cached.
    if (before === generation && hub.connected) {
      cache.set(key, { token, principal: result.principal, expiresAt: result.expiresAt, tenants: result.tenants ?? [] });
    }
    return { ok: true, principal: result.principal, expiresAt: result.expiresAt };
  }

  // Keyed by the tail (signature or secret bytes): hashing a fresh 400-character header string per
  // request for a Map lookup costs more than the rest of the hit path together.
  const keyOf = (token: string) => token.slice(-32);

  function cached(token: string, key: string): Verified | undefined {
    const entry = cache.get(key);
    if (!entry || entry.token !== token) return undefined;
    if (entry.expiresAt && entry.expiresAt.getTime() <= Date.now()) {
      cache.delete(key);
      return { ok: false, reason: 'expired' };
    }
    hits++;
    if (entry.principal.credentialId) used.set(entry.principal.credentialId, Date.now());
    return { ok: true, principal: entry.principal, expiresAt: entry.expiresAt };
  }

  return {
    verify(token) {
      const key = keyOf(token);
      const hit = cached(token, key);
      if (hit !== undefined) return hit;
      misses++;
      return load(token, key);
    },
    peek: (token) => cached(token, keyOf(token)),
    dropLocal,
    markUsed(credentialId) {
      used.set(credentialId, Date.now());
    },
    async flushUsage() {
      if (used.size === 0) return;
      const batch = [...used].map(([id, at]) => ({ id, at: new Date(at) }));
      used.clear();
      await cq.touchCredentials(sql, batch);
    },
    get stats() {
      return { hits, misses, size: cache.size };
    },
  };
}

/** The error a presented but unusable token raises: same message as no token, reason in the details. */
export function invalidToken(reason: VerifyFailure): AppError {
  return new AppError('UNAUTHENTICATED', 'missing authentication', { details: { reason: reason === 'malformed' ? 'invalid_token' : `${reason}_token` } });
}
