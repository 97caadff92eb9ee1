// login: identifier + secret (password or device shared key), optional tenant context; attempts
// throttled by src/auth/login-throttle.ts, audited, and failures answered alike.
import type { AuditWriter } from '../audit/writer.js';
import type { Authz } from '../authz/types.js';
import type { Sql } from '../db/client.js';
import { forbidden, invalidInput, isAppError, notFound, unauthenticated } from '../errors.js';
import type { Logger } from '../log.js';
import { isUuid } from '../validate.js';
import * as cq from './credential-queries.js';
import type { Admission, LoginThrottle } from './login-throttle.js';
import { hashPassword, needsRehash, verifyPaced, type ScryptParams } from './passwords.js';
import type { Principal } from './principal.js';
import * as q from './queries.js';
import type { KeyedHash } from './secrets.js';
import type { IssuedSession, RequestMeta, Sessions } from './sessions.js';

export interface LoginInput {
  identifier?: string | null;
  secret?: string | null;
  kind?: string | null;
  tenantId?: string | null;
  tenantAlias?: string | null;
}

export interface LoginResult extends IssuedSession {
  emailVerified: boolean | null;
  verificationRequired: boolean;
}

export interface LoginSettings {
  scrypt: ScryptParams;
  emailVerificationRequired: boolean;
  allowUnverifiedEmailLogin: boolean;
}

const FAILED = 'invalid credentials';

export function createLogin(deps: {
  sql: Sql; sessions: Sessions; audit: AuditWriter; authz: Authz; hash: () => KeyedHash; log: Logger;
  settings: LoginSettings; throttle: LoginThrottle;
}) {
  const { sql, sessions, audit, authz, log, settings } = deps;
  // Unknown identifiers are checked against this, so they cost one scrypt like a wrong password does; it
  // also paces the check of a hash made with older parameters (verifyPaced).
  let dummy: Promise<string> | undefined;
  const dummyHash = () => (dummy ??= hashPassword('not a real password', settings.scrypt));

  function deny(reason: string, input: { identifier: string; kind: string }, meta: RequestMeta, entityId?: string | null, tenantId?: string | null) {
    audit.record({
      // A failed attempt is not an act of the entity it names: that entity is the target, not the actor.
      event: 'auth.login', outcome: 'deny', actorEntityId: null, tenantId: tenantId ?? null,
      targetKind: 'entity', targetId: entityId ?? null, requestId: meta.requestId,
      details: { reason, kind: input.kind, identifier: input.identifier.slice(0, 256), ip: meta.ip },
    });
  }

  /** Held back (RATE_LIMITED, audited) or admitted: the attempt is counted until the secret proves right. */
  async function admit(identity: string, input: { identifier: string; kind: string }, meta: RequestMeta): Promise<Admission> {
    try {
      return await deps.throttle.admit({ identity, ip: meta.ip });
    } catch (err) {
      if (isAppError(err) && err.kind === 'RATE_LIMITED') deny('rate_limited', input, meta);
      throw err;
    }
  }

  async function resolveTenant(input: LoginInput) {
    if (input.tenantId) {
      if (!isUuid(input.tenantId)) throw invalidInput('tenantId must be a UUID');
      return (await q.selectTenant(sql, { id: input.tenantId })) ?? { missing: true as const };
    }
    if (input.tenantAlias) return (await q.selectTenant(sql, { alias: input.tenantAlias })) ?? { missing: true as const };
    return null;
  }

  /** Whether the secret is the subject's (an unknown subject costs the same and is never right). */
  async function checkSecret(kind: string, secret: string, subject: { id: string } | null): Promise<boolean> {
    if (kind === 'password') {
      const credential = subject ? await cq.selectPassword(sql, subject.id) : null;
      const reference = await dummyHash();
      const ok = (await verifyPaced(secret, credential?.secret_hash ?? reference, reference)) && credential !== null;
      if (ok && credential && needsRehash(credential.secret_hash, settings.scrypt)) {
        hashPassword(secret, settings.scrypt).then((h) => cq.updateSecretHash(sql, credential.id, h))
          .catch((err: unknown) => log.warn('password rehash failed', { err: String(err) }));
      }
      return ok;
    }
    const key = await cq.selectSharedKeyState(sql, deps.hash()(secret));
    return key !== null && subject !== null && key.entity_id === subject.id && key.status === 'active' && !key.expired;
  }

  return {
    async login(input: LoginInput, meta: RequestMeta): Promise<LoginResult> {
      const kind = input.kind ?? 'password';
      if (kind !== 'password' && kind !== 'shared_key') throw invalidInput(`unsupported credential kind: ${kind}`);
      const identifier = (input.identifier ?? '').trim();
      const secret = input.secret ?? '';
      if (!identifier) throw invalidInput('identifier is required');
      if (!secret) throw invalidInput('secret is required');
      if (secret.length > 4096 || identifier.length > 512) throw invalidInput('identifier or secret is too long');
      const facts = { identifier, kind };

      const tenant = await resolveTenant(input);
      const contextTenantId = tenant && !('missing' in tenant) ? tenant.id : null;
      const found = await q.findLoginSubject(sql, identifier, contextTenantId);
      if (found === q.AMBIGUOUS_LOGIN) {
        deny('ambiguous_identifier', facts, meta);
        throw invalidInput('tenant_id or tenant_alias required for this identifier');
      }
      const subject = found;
      // Every spelling of one entity (name, email, alias, id) guesses the same secret: one counter.
      const admission = await admit(subject ? subject.id : `${kind}:${identifier.toLowerCase()}`, facts, meta);
      const ok = await checkSecret(kind, secret, subject).catch(async (err: unknown) => {
        await admission.abandoned();
        throw err;
      });
      if (!ok || !subject) {
        await admission.failed();
        deny(subject ? 'invalid_secret' : 'unknown_identifier', facts, meta, subject?.id);
        throw unauthenticated(FAILED);
      }
      await admission.succeeded();
      if (subject.status !== 'active') {
        deny('entity_inactive', facts, meta, subject.id);
        throw unauthenticated(FAILED);
      }
      const unverified = settings.emailVerificationRequired && subject.email !== null && !subject.email_verified;
      if (unverified && !settings.allowUnverifiedEmailLogin) {
        deny('email_unverified', facts, meta, subject.id);
        throw forbidden('email address is not verified');
      }
      let tenantId: string | null = subject.tenant_id;
      if (tenant) {
        const probe: Principal = {
          entityId: subject.id, entityKind: subject.kind, homeTenantId: subject.tenant_id, tenantId: null,
          sessionId: null, credentialId: null, credentialKind: 'session', scoped: false,
        };
        // Someone who may not enter the tenant learns nothing about it: an unknown tenant, another one and
        // its state all answer 'forbidden' (only a platform administrator reads 'tenant not found').
        if ('missing' in tenant) {
          deny('tenant_not_found', facts, meta, subject.id);
          throw (await authz.isPlatformAdmin(probe)) ? notFound('tenant') : forbidden();
        }
        if (!(await q.belongsToTenant(sql, subject.id, tenant.id)) && !(await authz.isPlatformAdmin(probe))) {
          deny('not_a_tenant_member', facts, meta, subject.id, tenant.id);
          throw forbidden();
        }
        if (tenant.status !== 'active') {
          deny(`tenant_${tenant.status}`, facts, meta, subject.id, tenant.id);
          throw forbidden(`tenant is ${tenant.status}`);
        }
        tenantId = tenant.id;
      }
      const session = await sessions.issue(subject.id, tenantId, kind, meta);
      audit.record({
        event: 'auth.login', outcome: 'allow', actorEntityId: subject.id, tenantId, targetKind: 'session', targetId: session.sessionId,
        requestId: meta.requestId, details: { kind, ip: meta.ip },
      });
      return { ...session, emailVerified: subject.email === null ? null : subject.email_verified, verificationRequired: unverified };
    },
    warmUp: () => dummyHash().then(() => undefined),
  };
}

export type Login = ReturnType<typeof createLogin>;
