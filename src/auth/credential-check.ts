// The runtime credential check (gRPC AuthService.AuthenticateCredential): a protocol adapter, itself
// authenticated, asks whether an identifier + secret (password or shared key) is valid, without a session
// being minted. Shared keys are answered from the same device-key cache as MQTT and HTTP publish, tenants
// from a NOTIFY-dropped cache: a device key presented by its entity UUID costs no query once seen.
// Attempts go through login's throttle (login-throttle.ts) with the client's address (the adapter's peer
// address for gRPC, the holder's own for EST Basic), and failures are audited.
import type { AuditWriter } from '../audit/writer.js';
import type { Sql } from '../db/client.js';
import { forbidden, invalidInput, unauthenticated } from '../errors.js';
import { isUuid } from '../validate.js';
import * as cq from './credential-queries.js';
import type { DeviceKeys } from './device-keys.js';
import type { LoginThrottle } from './login-throttle.js';
import { hashPassword, verifyPaced, type ScryptParams } from './passwords.js';
import type { Principal } from './principal.js';
import * as q from './queries.js';
import type { TenantSelector, TenantState, TenantStates } from './tenant-states.js';

export interface CredentialRequest {
  identifier: string;
  secret: string;
  /** 'password' (also when empty) or 'shared_key', any case. */
  kind: string;
  /** Empty strings mean not given (proto3). */
  tenantId: string;
  tenantAlias: string;
}

export interface CredentialMatch {
  entityId: string;
  /** The selected tenant, else the entity's own; null for a global entity. */
  tenantId: string | null;
  credentialId: string;
}

/** The caller's gate for a tenant (null: platform); synchronous when its decision is memoised. */
export type Admit = (caller: Principal, tenantId: string | null) => void | Promise<void>;

/** A credential presented by its own holder (EST Basic): no adapter in between, so nobody to admit. */
export interface SelfCheck {
  transport: string;
  /** The holder's address (the enrollment listener's client, resolved through trusted proxies). */
  ip: string | null;
}

export interface CredentialCheck {
  /** `checkpoint` throws once the call's deadline passed: the work after it is skipped. */
  /** `peer`: the adapter's address, counted with the identity (login-throttle.ts `relayed`). */
  authenticate(req: CredentialRequest, caller: Principal, admit: Admit, checkpoint: () => void, peer: string | null): CredentialMatch | Promise<CredentialMatch>;
  /** The holder itself presents the credential (EST Basic): same checks, throttle and audit, no caller gate. */
  authenticateSelf(req: CredentialRequest, self: SelfCheck): Promise<CredentialMatch>;
}

interface Parsed {
  identifier: string;
  secret: string;
  kind: 'password' | 'shared_key';
  tenant: TenantSelector | null;
}

interface Candidate {
  entityId: string;
  homeTenantId: string | null;
  credentialId: string;
  status: string;
  emailUnverified: boolean;
}

const FAILED = 'invalid credentials';

function parse(req: CredentialRequest): Parsed {
  const kind = req.kind.trim().toLowerCase() || 'password';
  if (kind !== 'password' && kind !== 'shared_key') throw invalidInput('unsupported credential kind: expected password or shared_key');
  const identifier = req.identifier.trim();
  if (!identifier) throw invalidInput('identifier is required');
  if (!req.secret) throw invalidInput('secret is required');
  if (req.secret.length > 4096 || identifier.length > 512) throw invalidInput('identifier or secret is too long');
  const tenantId = req.tenantId.trim();
  const tenantAlias = req.tenantAlias.trim();
  if (tenantId && tenantAlias) throw invalidInput('give tenant_id or tenant_alias, not both');
  if (tenantId && !isUuid(tenantId)) throw invalidInput('tenant_id must be a UUID');
  if (tenantAlias.length > 256) throw invalidInput('tenant_alias is too long');
  const tenant: TenantSelector | null = tenantId ? { id: tenantId } : tenantAlias ? { alias: tenantAlias } : null;
  return { identifier, secret: req.secret, kind, tenant };
}

export function createCredentialCheck(deps: {
  sql: Sql; audit: AuditWriter; deviceKeys: DeviceKeys; tenants: TenantStates; throttle: LoginThrottle;
  settings: { scrypt: ScryptParams; emailVerificationRequired: boolean; allowUnverifiedEmailLogin: boolean };
}): CredentialCheck {
  const { sql, audit, deviceKeys, tenants, throttle, settings } = deps;
  // Unknown identifiers are checked against this, so they cost one scrypt like a wrong password does.
  let dummy: Promise<string> | undefined;
  const dummyHash = () => (dummy ??= hashPassword('not a real password', settings.scrypt));

  function denyAs(reason: string, p: Parsed, caller: Principal | null, tenantId: string | null, entityId: string | null = null, transport = 'grpc'): void {
    audit.record({
      event: 'auth.credential_authenticate', outcome: 'deny', actorEntityId: caller?.entityId ?? null, tenantId,
      targetKind: 'entity', targetId: entityId,
      details: { reason, kind: p.kind, identifier: p.identifier.slice(0, 256), transport },
    });
  }

  /**
   * The common case, answered from memory: a cached shared key presented by its entity's UUID, the tenant
   * (selected or home) cached and active, the caller's gate memoised. undefined: take the full path.
   * The throttle is not consulted here: a hit is an exact match with a key verified before, not a guess.
   */
  function fromCache(p: Parsed, caller: Principal, admit: Admit): CredentialMatch | undefined {
    if (p.kind !== 'shared_key' || !isUuid(p.identifier)) return undefined;
    const selected = p.tenant === null ? null : tenants.peek(p.tenant);
    if (selected === undefined) return undefined;
    const identity = deviceKeys.peek(p.secret);
    if (!identity || identity.status !== 'active' || identity.entityId !== p.identifier.toLowerCase()) return undefined;
    if (selected !== null && (selected.status !== 'active' || identity.tenantId !== selected.id)) return undefined;
    if (selected === null && identity.tenantId !== null && tenants.peek({ id: identity.tenantId })?.status !== 'active') return undefined;
    const gate = admit(caller, selected?.id ?? null);
    if (gate !== undefined) {
      // Not memoised: the full path asks again (then memoised) and answers its refusal.
      gate.catch(() => undefined);
      return undefined;
    }
    return { entityId: identity.entityId, tenantId: identity.tenantId, credentialId: identity.credentialId };
  }

  /** The entity an identifier names, as login resolves it; an e-mail address shared by humans needs a tenant. */
  async function loginSubject(identifier: string, tenantId: string | null) {
    const found = await q.findLoginSubject(sql, identifier, tenantId);
    if (found === q.AMBIGUOUS_LOGIN) throw invalidInput('tenant_id or tenant_alias required for this identifier');
    return found;
  }

  type Subject = q.LoginSubject | null;

  async function sharedKey(p: Parsed, subject: Subject): Promise<Candidate | null> {
    const identity = await deviceKeys.authenticate(p.secret);
    if (!identity || subject === null || subject.id !== identity.entityId) return null;
    return { entityId: identity.entityId, homeTenantId: identity.tenantId, credentialId: identity.credentialId, status: identity.status, emailUnverified: false };
  }

  async function password(p: Parsed, subject: Subject, checkpoint: () => void): Promise<Candidate | null> {
    const credential = subject ? await cq.selectPassword(sql, subject.id) : null;
    const reference = await dummyHash();
    checkpoint();
    const ok = (await verifyPaced(p.secret, credential?.secret_hash ?? reference, reference)) && credential !== null;
    if (!ok || !subject || !credential) return null;
    return {
      entityId: subject.id, homeTenantId: subject.tenant_id, credentialId: credential.id, status: subject.status,
      emailUnverified: settings.emailVerificationRequired && subject.email !== null && !subject.email_verified,
    };
  }

  async function full(p: Parsed, caller: Principal | null, admit: Admit, checkpoint: () => void, ip: string | null, transport = 'grpc'): Promise<CredentialMatch> {
    const deny = (reason: string, tenantId: string | null, entityId: string | null = null) => denyAs(reason, p, caller, tenantId, entityId, transport);
    const admitCaller = (tenantId: string | null) => (caller === null ? undefined : admit(caller, tenantId));
    let tenant: TenantState | null = null;
    if (p.tenant !== null) {
      tenant = await tenants.resolve(p.tenant);
      if (tenant === null) {
        // Only a platform-wide caller learns that the tenant is unknown, and then only as a failed check.
        await admitCaller(null);
        deny('tenant_not_found', null);
        throw unauthenticated(FAILED);
      }
    }
    await admitCaller(tenant?.id ?? null);
    if (tenant !== null && tenant.status !== 'active') {
      deny(`tenant_${tenant.status}`, tenant.id);
      throw unauthenticated(FAILED);
    }
    checkpoint();
    const subject = await loginSubject(p.identifier, tenant?.id ?? null);
    // The identity being guessed, as login counts it, so gRPC, EST and login failures add up; with the
    // client's address, so failures from one address never refuse the right secret from another. An
    // adapter (caller) relays a whole fleet: its address counts per identity, not as one total.
    const identity = subject ? subject.id : `${p.kind}:${p.identifier.toLowerCase()}`;
    const admission = await throttle.admit({ identity, ip, relayed: caller !== null });
    const candidate = await (async () => {
      checkpoint();
      return p.kind === 'shared_key' ? await sharedKey(p, subject) : await password(p, subject, checkpoint);
    })().catch(async (err: unknown) => {
      // No verdict (the database cut the check, the caller went away): not a guess, not counted.
      await admission.abandoned();
      throw err;
    });
    if (candidate === null) {
      await admission.failed();
      deny('invalid_secret', tenant?.id ?? null);
      throw unauthenticated(FAILED);
    }
    await admission.succeeded();
    if (candidate.status !== 'active') {
      deny('entity_inactive', tenant?.id ?? null, candidate.entityId);
      throw unauthenticated(FAILED);
    }
    if (candidate.emailUnverified && !settings.allowUnverifiedEmailLogin) {
      deny('email_unverified', tenant?.id ?? null, candidate.entityId);
      throw forbidden('email address is not verified');
    }
    if (tenant !== null) {
      // Tenant isolation: another tenant's credential is no credential here.
      if (candidate.homeTenantId !== tenant.id && !(await q.belongsToTenant(sql, candidate.entityId, tenant.id))) {
        deny('not_a_tenant_member', tenant.id, candidate.entityId);
        throw unauthenticated(FAILED);
      }
    } else if (candidate.homeTenantId !== null) {
      const home = await tenants.resolve({ id: candidate.homeTenantId });
      if (home?.status !== 'active') {
        deny(`tenant_${home?.status ?? 'missing'}`, candidate.homeTenantId, candidate.entityId);
        throw unauthenticated(FAILED);
      }
    }
    return { entityId: candidate.entityId, tenantId: tenant?.id ?? candidate.homeTenantId, credentialId: candidate.credentialId };
  }

  return {
    authenticate(req, caller, admit, checkpoint, peer) {
      const p = parse(req);
      return fromCache(p, caller, admit) ?? full(p, caller, admit, checkpoint, peer);
    },
    async authenticateSelf(req, self) {
      return full(parse(req), null, () => undefined, () => undefined, self.ip, self.transport);
    },
  };
}
