// Reading certificates: the certificate and certificates queries (grants applied before paging), and the
// lookups other entry points resolve with (by issuer and serial, by fingerprint, by leaf DER), plus the
// trust bundle. Certificates without an issuer (version 1) do not exist here: the schema refuses them.
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import { pageOf } from '../../db/paging.js';
import { forbidden, invalidInput, notFound } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess, SubjectEntity } from '../authorities/access.js';
import { selectByFingerprint as selectAuthorityByFingerprint } from '../authorities/authority-queries.js';
import { selectPlatformChain } from '../authorities/chain-queries.js';
import * as cq from './certificate-queries.js';
import { derToPem, sha256Hex } from '../x509/der.js';
import { normaliseFingerprint, normaliseSerial } from '../revocation/revocation.js';

export type CertificateStatus = 'active' | 'revoked' | 'expired';

export const statusOf = (row: cq.CertificateRow, now = Date.now()): CertificateStatus =>
  row.status === 'revoked' ? 'revoked' : row.expires_at.getTime() <= now ? 'expired' : 'active';

/** What resolution answers (gRPC ResolveCertificateV2, /pki/reenroll, OCSP): the certificate's owner and state. */
export interface ResolvedCertificate {
  credentialId: string;
  entityId: string;
  tenantId: string | null;
  issuerId: string;
  serialNumber: string;
  fingerprintSha256: string;
  identityUri: string | null;
  status: CertificateStatus;
  notBefore: Date | null;
  expiresAt: Date;
  revokedAt: Date | null;
  revocationReason: string | null;
}

export function resolved(row: cq.CertificateRow): ResolvedCertificate {
  return {
    credentialId: row.id, entityId: row.entity_id, tenantId: row.tenant_id, issuerId: row.issuer_id, serialNumber: row.identifier,
    fingerprintSha256: row.metadata.fingerprint_sha256, identityUri: row.metadata.identity_uri ?? null, status: statusOf(row),
    notBefore: row.metadata.not_before ? new Date(row.metadata.not_before) : null, expiresAt: row.expires_at, revokedAt: row.revoked_at,
    revocationReason: row.revocation_reason,
  };
}

function timestamp(field: string, value: unknown): Date | undefined {
  if (value === undefined || value === null) return undefined;
  const at = typeof value === 'string' ? new Date(value) : new Date(NaN);
  if (Number.isNaN(at.getTime())) throw invalidInput(`${field} must be an RFC 3339 timestamp`);
  return at;
}

/**
 * Certificates one serial may name: one per issuer (serials are random, so more than one is rare). Bounds
 * the authorization checks a lookup by serial runs; a collision beyond it is not looked at.
 */
const SERIAL_MATCH_LIMIT = 20;

const given = (value: unknown) => value !== undefined && value !== null && value !== '';

export function createCertificateReads(deps: { sql: Sql; access: PkiAccess; lists: { defaultLimit: number; maxLimit: number } }) {
  const { sql, access } = deps;

  async function entity(id: string): Promise<SubjectEntity | undefined> {
    const [row] = await sql<SubjectEntity[]>`
      select id, kind, name, tenant_id, status, deleted_at is not null as deleted from entities where id = ${id}`;
    return row;
  }

  async function get(p: Principal, credentialId: unknown): Promise<cq.CertificateRow> {
    const row = await cq.selectCertificate(sql, v.uuid('credentialId', credentialId));
    if (!row) throw await access.missingCertificate(p);
    const owner = await entity(row.entity_id);
    if (!owner || !(await access.mayRead(p, owner, row.id))) throw forbidden();
    return row;
  }

  /**
   * By serial (the upstream UI's entity credentials view), optionally under one issuer: serials are unique
   * per issuer only. Only certificates the caller may read count: another tenant's is NOT_FOUND, as an
   * unknown one, and a serial the caller sees under two issuers is refused naming them.
   */
  async function bySerial(p: Principal, serialNumber: unknown, issuerArg: unknown): Promise<cq.CertificateRow> {
    const serial = normaliseSerial(serialNumber);
    const issuerId = given(issuerArg) ? v.uuid('issuerId', issuerArg) : null;
    const visible: cq.CertificateRow[] = [];
    const rows = (await cq.selectBySerial(sql, serial, issuerId, SERIAL_MATCH_LIMIT)).sort((a, b) => a.issuer_id.localeCompare(b.issuer_id));
    for (const row of rows) {
      const owner = await entity(row.entity_id);
      if (owner && (await access.mayRead(p, owner, row.id))) visible.push(row);
    }
    const [first] = visible;
    if (!first) throw notFound('certificate');
    if (visible.length > 1) {
      throw invalidInput(`serialNumber ${serial} names certificates of ${visible.length} issuers; give issuerId (${visible.map((r) => r.issuer_id).join(' or ')})`);
    }
    return first;
  }

  return {
    get,

    /** The certificate query: exactly one of credentialId or serialNumber; issuerId narrows a serial. */
    async find(p: Principal, args: Record<string, unknown>): Promise<cq.CertificateRow> {
      const byId = given(args.credentialId);
      const bySerialNumber = given(args.serialNumber);
      if (byId && bySerialNumber) throw invalidInput('give credentialId or serialNumber, not both');
      if (byId) {
        if (given(args.issuerId)) throw invalidInput('issuerId goes with serialNumber, not credentialId');
        return get(p, args.credentialId);
      }
      if (!bySerialNumber) throw invalidInput('credentialId or serialNumber is required');
      return bySerial(p, args.serialNumber, args.issuerId);
    },

    async list(p: Principal, args: Record<string, unknown> & { limit?: number | null; offset?: number | null }) {
      const filter: cq.CertificateFilter = { tenantIds: null };
      if (args.status !== undefined && args.status !== null) filter.status = v.oneOf('status', args.status, ['active', 'revoked', 'expired'] as const);
      filter.expiresFrom = timestamp('expiresFrom', args.expiresFrom);
      filter.expiresBefore = timestamp('expiresBefore', args.expiresBefore);
      if (args.issuerId) filter.issuerId = v.uuid('issuerId', args.issuerId);
      if (args.tenantId) filter.tenantId = v.uuid('tenantId', args.tenantId);
      if (args.entityId) {
        filter.entityId = v.uuid('entityId', args.entityId);
        // One entity: the credential rule for that entity decides (it covers global entities too).
        const owner = await entity(filter.entityId);
        if (!owner || owner.deleted) throw await access.missingCertificate(p, 'entity', owner?.tenant_id);
        if (!(await access.mayReadEntity(p, owner))) throw forbidden();
      } else {
        // Grants before paging: only tenants whose credentials the caller reads or manages.
        filter.tenantIds = await access.listableTenants(p, filter.tenantId);
        if (filter.tenantIds !== null && filter.tenantId && !filter.tenantIds.includes(filter.tenantId)) throw forbidden();
      }
      return cq.listCertificates(sql, filter, pageOf(args, deps.lists));
    },

    // ---- lookups for other entry points (no authorization: callers decide who may resolve) ----

    async byIssuerSerial(issuerId: string, serialNumber: string): Promise<ResolvedCertificate | null> {
      if (!v.isUuid(issuerId)) return null;
      const row = await cq.selectByIssuerSerial(sql, issuerId, normaliseSerial(serialNumber));
      return row ? resolved(row) : null;
    },
    async byFingerprint(fingerprintSha256: string): Promise<ResolvedCertificate | null> {
      const row = await cq.selectByFingerprint(sql, normaliseFingerprint(fingerprintSha256));
      return row ? resolved(row) : null;
    },
    /** A leaf as presented in a TLS handshake (DER): found by its SHA-256 fingerprint, which is unique. */
    async byDer(der: Uint8Array): Promise<ResolvedCertificate | null> {
      const row = await cq.selectByFingerprint(sql, sha256Hex(der));
      return row ? resolved(row) : null;
    },
    /** gRPC's (issuer fingerprint, serial) tuple. */
    async byIssuerFingerprintSerial(issuerFingerprintSha256: string, serialNumber: string): Promise<ResolvedCertificate | null> {
      const issuer = await selectAuthorityByFingerprint(sql, normaliseFingerprint(issuerFingerprintSha256));
      if (!issuer) return null;
      const row = await cq.selectByIssuerSerial(sql, issuer.id, normaliseSerial(serialNumber));
      return row ? resolved(row) : null;
    },
    /** The full record (PEM included) of a certificate credential, for handlers that answer with it. */
    record: (credentialId: string) => (v.isUuid(credentialId) ? cq.selectCertificate(sql, credentialId) : Promise.resolve(undefined)),

    /**
     * Trust anchors as PEM, O(1) in tenants: the active root(s) first, then the platform intermediates and
     * platform leaf issuers that can still have valid certificates below them (active, retiring, retired,
     * not expired), parents first. Tenant authorities are not listed: each tenant's chain is published
     * under its EST label, and every leaf names its issuer's certificate (caIssuers URL).
     */
    async trustBundle(): Promise<{ roots: string; intermediates: string; pem: string }> {
      const rows = await selectPlatformChain(sql);
      const pem = (root: boolean) => rows.filter((r) => (r.kind === 'root') === root).map((r) => derToPem(r.certificate_der as Buffer, 'CERTIFICATE')).join('');
      const roots = pem(true);
      const intermediates = pem(false);
      return { roots, intermediates, pem: roots + intermediates };
    },
  };
}

export type CertificateReads = ReturnType<typeof createCertificateReads>;
