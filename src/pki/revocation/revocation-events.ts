// What a revocation writes besides the credential: its ledger entry (with the CRL entry DER, encoded once
// here), its audit event and outbox record, and the NOTIFY that lets every instance drop cached answers
// (OCSP responses, CRLs, resolutions) about the serial.
import type { AuditEvent } from '../../audit/index.js';
import { crlEntryDer, type RevocationReason } from '../x509/der.js';
import type { OutboxRecord } from '../issuance/certificate-queries.js';
import type { LedgerEntry, RevocableRow } from './revocation-queries.js';

/** NOTIFY topic; payload `{ revoked: [{ issuerId, serialNumber }] }`, or `{ all: true }` when too large to send. */
export const REVOKED_TOPIC = 'pki.revoked';

export interface RevokedNotice {
  revoked?: { issuerId: string; serialNumber: string }[];
  all?: boolean;
}

export function revokedPayload(entries: LedgerEntry[]): RevokedNotice {
  return { revoked: entries.map((e) => ({ issuerId: e.issuerId, serialNumber: e.serialNumber })) };
}

/** A CRL entry states whole seconds: the ledger keeps the same instant. */
export const revocationInstant = (at = Date.now()) => new Date(Math.floor(at / 1000) * 1000);

export function ledgerEntryFor(row: RevocableRow, reason: RevocationReason, actorEntityId: string | null, at: Date): LedgerEntry {
  return {
    issuerId: row.issuer_id, serialNumber: row.identifier, credentialId: row.id, entityId: row.entity_id, tenantId: row.tenant_id,
    fingerprintSha256: row.fingerprint_sha256, reason, revokedAt: at.toISOString(), notAfter: row.expires_at.toISOString(),
    actorEntityId, crlEntry: crlEntryDer(row.identifier, at, reason).toString('hex'),
  };
}

export function revocationAudit(entry: LedgerEntry, meta: { requestId?: string | null; via: string; details?: Record<string, unknown> }): AuditEvent {
  return {
    event: 'certificate.revoke', outcome: 'allow', actorEntityId: entry.actorEntityId, tenantId: entry.tenantId, targetKind: 'credential',
    targetId: entry.credentialId, requestId: meta.requestId ?? null,
    details: {
      entity_id: entry.entityId, issuer_id: entry.issuerId, serial_number: entry.serialNumber, fingerprint_sha256: entry.fingerprintSha256,
      reason: entry.reason, via: meta.via, ...meta.details,
    },
  };
}

export function revocationOutbox(entry: LedgerEntry, details: Record<string, unknown> = {}): OutboxRecord {
  return {
    event: 'certificate.revoke', tenantId: entry.tenantId,
    payload: {
      target_id: entry.credentialId, credential_id: entry.credentialId, entity_id: entry.entityId, tenant_id: entry.tenantId,
      issuer_id: entry.issuerId, serial_number: entry.serialNumber, fingerprint_sha256: entry.fingerprintSha256, reason: entry.reason,
      revoked_at: entry.revokedAt, actor_entity_id: entry.actorEntityId, details,
    },
  };
}
