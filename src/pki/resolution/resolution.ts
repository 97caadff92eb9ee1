// Certificate resolution for services that terminate mTLS themselves (gRPC CertificateService) and for the
// service's own TLS listeners (their client-certificate verifier): a leaf by its DER, its SHA-256 fingerprint, or its issuer's fingerprint and serial, to the entity, tenant and
// credential it stands for; and revoking all of an entity's certificates through the revocation service
// (the same ledger, audit and outbox as GraphQL revokeEntityCertificates).
//
// Answers are cached in a bounded LRU. A revocation drops the entry of its (issuer, serial) on every
// instance: here through the revocation service's local hook before the revoking call returns, elsewhere
// through the 'pki.revoked' NOTIFY; a lost LISTEN connection clears the whole cache on reconnect, since
// notices may have been missed. A lookup that raced a revocation is not stored (generation check).
//
// Who may ask: the runtime gate (authz.check, policy.manage or manage) on the certificate's tenant or at
// platform scope. A certificate of a tenant the caller is not admitted to is answered exactly like an
// unknown one to a caller admitted to its own scope, and PERMISSION_DENIED to a caller admitted nowhere,
// so the answer never tells whether another tenant's certificate exists.
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import { invalidInput, isAppError, notFound } from '../../errors.js';
import { createIndexedLru } from '../../indexed-lru.js';
import * as v from '../../validate.js';
import type { CertificateReads, CertificateStatus, ResolvedCertificate } from '../issuance/certificates.js';
import { revocationReason, sha256Hex } from '../x509/der.js';
import { REVOKED_TOPIC, type RevokedNotice } from '../revocation/revocation-events.js';
import { normaliseFingerprint, normaliseSerial, type RevocationService } from '../revocation/revocation.js';
import { selectEntityTenant } from './resolution-queries.js';

/** The runtime caller gate (src/authz/api.ts admitCaller): nothing when admitted, else throws FORBIDDEN. */
export type Admit = (caller: Principal, tenantId: string | null) => void | Promise<void>;

export interface ResolveRequest {
  /** proto3: empty means not given. */
  certificateDer: Uint8Array;
  fingerprintSha256: string;
  issuerFingerprintSha256: string;
  serialNumber: string;
  expectedTenantId: string;
}

export interface Resolution extends ResolvedCertificate {
  /** Now: a cached answer ages into 'expired' without being reloaded. */
  status: CertificateStatus;
}

export interface ResolutionSettings {
  /** Entries kept (SVC_GRPC_CERT_CACHE_SIZE). */
  max: number;
  /** A bound on staleness for changes no revocation announces (SVC_GRPC_CERT_CACHE_TTL_SECS). */
  ttlSecs: number;
}

interface Lookup {
  key: string;
  load: () => Promise<ResolvedCertificate | null>;
}

const refOf = (issuerId: string, serialNumber: string) => `${issuerId}:${serialNumber}`;

const statusNow = (r: ResolvedCertificate, now = Date.now()): CertificateStatus =>
  r.status === 'revoked' ? 'revoked' : r.expiresAt.getTime() <= now ? 'expired' : 'active';

function field<T>(name: string, parse: () => T, expected: string): T {
  try {
    return parse();
  } catch (err) {
    if (isAppError(err) && err.kind === 'INVALID_INPUT') throw invalidInput(`${name} must be ${expected}`);
    throw err;
  }
}

function lookupsOf(req: ResolveRequest, certificates: CertificateReads): Lookup[] {
  const lookups: Lookup[] = [];
  if (req.certificateDer.length > 0) {
    const fingerprint = sha256Hex(req.certificateDer);
    lookups.push({ key: `fp:${fingerprint}`, load: () => certificates.byFingerprint(fingerprint) });
  }
  if (req.fingerprintSha256 !== '') {
    const fingerprint = field('fingerprint_sha256', () => normaliseFingerprint(req.fingerprintSha256), '64 hex digits (SHA-256 of the DER certificate)');
    lookups.push({ key: `fp:${fingerprint}`, load: () => certificates.byFingerprint(fingerprint) });
  }
  const issuerGiven = req.issuerFingerprintSha256 !== '';
  if (issuerGiven !== (req.serialNumber !== '')) throw invalidInput('issuer_fingerprint_sha256 and serial_number go together');
  if (issuerGiven) {
    const issuer = field('issuer_fingerprint_sha256', () => normaliseFingerprint(req.issuerFingerprintSha256), '64 hex digits (SHA-256 of the issuer\'s DER certificate)');
    const serial = field('serial_number', () => normaliseSerial(req.serialNumber), 'a hex string');
    lookups.push({ key: `is:${issuer}:${serial}`, load: () => certificates.byIssuerFingerprintSerial(issuer, serial) });
  }
  if (lookups.length === 0) throw invalidInput('give certificate_der, fingerprint_sha256, or issuer_fingerprint_sha256 with serial_number');
  // The DER and its own fingerprint are one lookup, not two.
  return lookups.filter((l, i) => lookups.findIndex((o) => o.key === l.key) === i);
}

export function createCertificateResolution(deps: {
  sql: Sql; hub: NotifyHub; certificates: CertificateReads; revocation: RevocationService; admit: Admit; settings: ResolutionSettings;
}) {
  const { sql, hub, certificates, revocation, admit } = deps;
  const { cache, drop } = createIndexedLru<ResolvedCertificate>({
    max: deps.settings.max, ttl: deps.settings.ttlSecs * 1000, ttlAutopurge: false,
    refsOf: (r) => [refOf(r.issuerId, r.serialNumber)],
  });
  // Bumped by every drop: a lookup that started before it may hold what the drop removed, so it is not stored.
  let generation = 0;
  const stats = { hits: 0, misses: 0, dropped: 0, cleared: 0 };

  function forget(notice: RevokedNotice | null | undefined): void {
    generation++;
    if (!notice || notice.all || !Array.isArray(notice.revoked)) {
      stats.cleared++;
      return cache.clear();
    }
    stats.dropped += drop(notice.revoked.map((r) => refOf(r.issuerId, r.serialNumber))).length;
  }
  const unsubscribe = [
    hub.subscribe(REVOKED_TOPIC, (payload) => forget(payload as RevokedNotice)),
    hub.onReconnect(() => forget(null)),
    revocation.onRevoked(forget),
  ];

  async function find(lookup: Lookup): Promise<ResolvedCertificate | null> {
    const cached = cache.get(lookup.key);
    if (cached !== undefined) {
      stats.hits++;
      return cached;
    }
    stats.misses++;
    const seen = generation;
    const found = await lookup.load();
    // Unknown answers are not kept: a certificate issued a moment later must resolve at once.
    if (found && seen === generation) cache.set(lookup.key, found);
    return found;
  }

  /** True when admitted at the tenant (platform for null); a refusal is an answer, not an error. */
  async function admitted(caller: Principal, tenantId: string | null): Promise<boolean> {
    try {
      await admit(caller, tenantId);
      return true;
    } catch (err) {
      if (isAppError(err) && err.kind === 'FORBIDDEN') return false;
      throw err;
    }
  }

  /** Not there, or not the caller's to see: NOT_FOUND to a caller admitted where it asked, else FORBIDDEN. */
  async function unknown(caller: Principal, scope: string | null, what: string): Promise<never> {
    await admit(caller, scope);
    throw notFound(what);
  }

  /** Where the caller asks from: the expected tenant, else its session's or its own tenant, else the platform. */
  const scopeOf = (caller: Principal, expected: string | null) => expected ?? caller.tenantId ?? caller.homeTenantId;

  return {
    async resolve(caller: Principal, req: ResolveRequest): Promise<Resolution> {
      const expected = req.expectedTenantId === '' ? null : v.uuid('expected_tenant_id', req.expectedTenantId);
      const lookups = lookupsOf(req, certificates);
      const found = await Promise.all(lookups.map(find));
      const first = found[0];
      // Several selectors must name one certificate; V1 certificates (no issuer) are never stored, so never found.
      const one = first && found.every((r) => r?.credentialId === first.credentialId) ? first : null;
      if (one && (expected === null || one.tenantId === expected) && (await admitted(caller, one.tenantId))) {
        return { ...one, status: statusNow(one) };
      }
      return unknown(caller, scopeOf(caller, expected), 'certificate');
    },

    /**
     * A leaf presented in a TLS handshake, for the listeners' verifier (src/pki/client-certificates.ts):
     * the same cache as resolve(), without a caller: the listener itself is asking.
     */
    async certificate(der: Uint8Array): Promise<Resolution | null> {
      const fingerprint = sha256Hex(der);
      const found = await find({ key: `fp:${fingerprint}`, load: () => certificates.byFingerprint(fingerprint) });
      return found ? { ...found, status: statusNow(found) } : null;
    },

    /**
     * Every active certificate of the entity, through the revocation service; the number revoked. The
     * client certificate of the call (mutual TLS), when the service issued it, is named in the audit events.
     */
    async revokeEntity(caller: Principal, entityIdValue: string, reasonValue: string, requestId: string | null = null, clientCertificateId: string | null = null): Promise<number> {
      const entityId = v.uuid('entity_id', entityIdValue);
      const reason = revocationReason(reasonValue === '' ? undefined : reasonValue);
      const entity = await selectEntityTenant(sql, entityId);
      if (!entity || !(await admitted(caller, entity.tenant_id))) return unknown(caller, scopeOf(caller, null), 'entity');
      // The revocation service applies its own rule too (credential manage over the entity), as for GraphQL.
      return revocation.revokeEntity({ kind: 'principal', principal: caller, requestId, via: 'grpc', clientCertificateId }, entityId, reason);
    },

    stats,
    get size() {
      return cache.size;
    },
    close(): void {
      for (const u of unsubscribe) u();
      cache.clear();
    },
  };
}

export type CertificateResolution = ReturnType<typeof createCertificateResolution>;
