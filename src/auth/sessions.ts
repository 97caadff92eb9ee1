// Sessions: a row per login, a JWT naming entity, session and tenant context; logout and refresh.
import type { AuditWriter } from '../audit/writer.js';
import type { Sql } from '../db/client.js';
import { invalidInput } from '../errors.js';
import { signJwt } from './jwt.js';
import type { Keyring } from './keyring.js';
import type { Principal } from './principal.js';
import * as q from './queries.js';
import type { Verifier } from './verifier.js';

export interface IssuedSession {
  token: string;
  entityId: string;
  sessionId: string;
  tenantId: string | null;
  expiresAt: string;
}

export interface RequestMeta {
  ip: string | null;
  userAgent: string | null;
  requestId: string | null;
}

export interface Sessions {
  issue(entityId: string, tenantId: string | null, credentialKind: string, meta: RequestMeta): Promise<IssuedSession>;
  logout(principal: Principal, meta: RequestMeta): Promise<boolean>;
  refresh(principal: Principal, meta: RequestMeta): Promise<IssuedSession>;
  get(id: string): ReturnType<typeof q.selectSession>;
}

export function createSessions(deps: {
  sql: Sql; keyring: Keyring; verifier: Verifier; audit: AuditWriter;
  jwt: { issuer: string; audience: string; expirySecs: number };
}): Sessions {
  const { sql, keyring, verifier, audit, jwt } = deps;

  function tokenFor(entityId: string, sessionId: string, tenantId: string | null, expiresAt: Date): string {
    const { kid, key } = keyring.signer();
    const iat = Math.floor(Date.now() / 1000);
    return signJwt({
      iss: jwt.issuer, aud: jwt.audience, sub: entityId, sid: sessionId, tid: tenantId, iat,
      exp: Math.floor(expiresAt.getTime() / 1000),
    }, kid, key);
  }

  return {
    async issue(entityId, tenantId, credentialKind, meta) {
      const row = await q.insertSession(sql, {
        entityId, tenantId, credentialKind, ip: meta.ip, userAgent: meta.userAgent?.slice(0, 512) ?? null, ttlSecs: jwt.expirySecs,
      });
      return {
        token: tokenFor(entityId, row.id, tenantId, row.expires_at),
        entityId, sessionId: row.id, tenantId, expiresAt: row.expires_at.toISOString(),
      };
    },
    async logout(principal, meta) {
      if (!principal.sessionId) return false;
      const revoked = await q.revokeSession(sql, principal.sessionId, 'logout');
      // The trigger on sessions NOTIFYs every instance; this one forgets the session before answering.
      verifier.dropLocal({ sessions: [principal.sessionId] });
      audit.record({
        event: 'auth.logout', outcome: 'allow', actorEntityId: principal.entityId, tenantId: principal.tenantId,
        targetKind: 'session', targetId: principal.sessionId, requestId: meta.requestId, details: { ip: meta.ip },
      });
      return revoked;
    },
    async refresh(principal, meta) {
      if (!principal.sessionId) throw invalidInput('session refresh requires a session token');
      const expiresAt = await q.extendSession(sql, principal.sessionId, jwt.expirySecs);
      if (!expiresAt) throw invalidInput('session refresh requires a session token');
      audit.record({
        event: 'auth.session.refresh', outcome: 'allow', actorEntityId: principal.entityId, tenantId: principal.tenantId,
        targetKind: 'session', targetId: principal.sessionId, requestId: meta.requestId,
      });
      return {
        token: tokenFor(principal.entityId, principal.sessionId, principal.tenantId, expiresAt),
        entityId: principal.entityId, sessionId: principal.sessionId, tenantId: principal.tenantId, expiresAt: expiresAt.toISOString(),
      };
    },
    get: (id) => q.selectSession(sql, id),
  };
}
