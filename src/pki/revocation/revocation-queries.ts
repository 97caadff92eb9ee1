// SQL of revocation: the append-only ledger (certificate_revocations), taking certificate credentials out
// of service, and the selections that bulk and cascaded revocations walk.
import type { Queryable } from '../../db/client.js';
import type { RevocationReason } from '../x509/der.js';

export interface LedgerEntry {
  issuerId: string;
  serialNumber: string;
  /** null for an authority's own certificate (it is no credential) */
  credentialId: string | null;
  entityId: string | null;
  tenantId: string | null;
  fingerprintSha256: string | null;
  reason: RevocationReason;
  /** ISO, whole seconds. */
  revokedAt: string;
  notAfter: string | null;
  actorEntityId: string | null;
  /** hex of the CRL entry DER */
  crlEntry: string;
}

export interface LedgerRow {
  id: string;
  issuer_id: string;
  serial_number: string;
  credential_id: string | null;
  entity_id: string | null;
  tenant_id: string | null;
  fingerprint_sha256: string | null;
  reason: RevocationReason;
  revoked_at: Date;
  not_after: Date | null;
  actor_entity_id: string | null;
  crl_entry: Buffer;
}

export async function insertLedger(sql: Queryable, entries: LedgerEntry[]): Promise<void> {
  if (entries.length > 0) await ledgerInsert(sql, entries);
}

/** The ledger insert as a query not yet run (awaited alone, or placed in a WITH clause of a larger statement). */
export function ledgerInsert(sql: Queryable, entries: LedgerEntry[]) {
  return sql`
    insert into certificate_revocations (issuer_id, serial_number, credential_id, entity_id, tenant_id, fingerprint_sha256, reason,
      revoked_at, not_after, actor_entity_id, crl_entry)
    select r."issuerId", r."serialNumber", r."credentialId", r."entityId", r."tenantId", r."fingerprintSha256", r.reason,
      r."revokedAt", r."notAfter", r."actorEntityId", decode(r."crlEntry", 'hex')
    from jsonb_to_recordset(${sql.json(entries as never)}) as r(
      "issuerId" uuid, "serialNumber" text, "credentialId" uuid, "entityId" uuid, "tenantId" uuid, "fingerprintSha256" text, reason text,
      "revokedAt" timestamptz, "notAfter" timestamptz, "actorEntityId" uuid, "crlEntry" text)`;
}

/** The credentials side of the same revocations (the ledger entries must be written in the same transaction). */
export async function markRevoked(sql: Queryable, entries: LedgerEntry[]): Promise<void> {
  if (entries.length > 0) await revokedUpdate(sql, entries);
}

export function revokedUpdate(sql: Queryable, entries: LedgerEntry[]) {
  return sql`
    update credentials c set status = 'revoked', revoked_at = r."revokedAt", revoked_by = r."actorEntityId", revocation_reason = r.reason
    from jsonb_to_recordset(${sql.json(entries as never)}) as r("credentialId" uuid, "revokedAt" timestamptz, "actorEntityId" uuid, reason text)
    where c.id = r."credentialId" and c.status = 'active'`;
}

export async function selectLedgerEntry(sql: Queryable, issuerId: string, serial: string): Promise<LedgerRow | undefined> {
  const [row] = await sql<LedgerRow[]>`
    select * from certificate_revocations where issuer_id = ${issuerId} and serial_number = ${serial}`;
  return row;
}

/** An issuer's ledger in insertion order, a page at a time (CRL building walks it with `afterId`). */
export async function selectIssuerLedger(sql: Queryable, issuerId: string, afterId: string, limit: number, notAfterFrom: Date | null): Promise<LedgerRow[]> {
  return sql<LedgerRow[]>`
    select * from certificate_revocations
    where issuer_id = ${issuerId} and id > ${afterId}
      ${notAfterFrom ? sql`and (not_after is null or not_after >= ${notAfterFrom})` : sql``}
    order by id limit ${limit}`;
}

export interface RevocableRow {
  id: string;
  entity_id: string;
  identifier: string;
  issuer_id: string;
  tenant_id: string | null;
  fingerprint_sha256: string | null;
  expires_at: Date;
}

/** Active certificates of an entity, locked for revocation. */
export async function lockActiveOfEntity(sql: Queryable, entityId: string): Promise<RevocableRow[]> {
  return sql<RevocableRow[]>`
    select c.id, c.entity_id, c.identifier, c.issuer_id, e.tenant_id, c.metadata ->> 'fingerprint_sha256' as fingerprint_sha256, c.expires_at
    from credentials c join entities e on e.id = c.entity_id
    where c.entity_id = ${entityId} and c.kind = 'certificate' and c.status = 'active'
    order by c.id for update of c`;
}

/** Active certificates of every entity a tenant owns, locked, a batch at a time (tenant deletion). */
export async function lockActiveOfTenant(sql: Queryable, tenantId: string, afterId: string, limit: number): Promise<RevocableRow[]> {
  return sql<RevocableRow[]>`
    select c.id, c.entity_id, c.identifier, c.issuer_id, e.tenant_id, c.metadata ->> 'fingerprint_sha256' as fingerprint_sha256, c.expires_at
    from credentials c join entities e on e.id = c.entity_id
    where e.tenant_id = ${tenantId} and c.kind = 'certificate' and c.status = 'active' and c.id > ${afterId}
    order by c.id limit ${limit} for update of c`;
}

/** Active certificates an authority signed, locked, a batch at a time (the authority is being revoked). */
export async function lockActiveOfIssuer(sql: Queryable, issuerId: string, afterId: string, limit: number): Promise<RevocableRow[]> {
  return sql<RevocableRow[]>`
    select c.id, c.entity_id, c.identifier, c.issuer_id, e.tenant_id, c.metadata ->> 'fingerprint_sha256' as fingerprint_sha256, c.expires_at
    from credentials c join entities e on e.id = c.entity_id
    where c.issuer_id = ${issuerId} and c.kind = 'certificate' and c.status = 'active' and c.id > ${afterId}
    order by c.id limit ${limit} for update of c`;
}

export type BulkScope = { tenantId: string } | { issuerId: string } | { principalGroupId: string };

export interface BulkRow extends RevocableRow {
  status: 'active' | 'revoked';
}

/**
 * One page of a bulk revocation: certificates in scope issued at or before the snapshot, after the cursor,
 * still active or revoked since the snapshot (those show as already revoked). Stable across pages.
 */
export async function selectBulkPage(sql: Queryable, scope: BulkScope, snapshotAt: Date, afterId: string, limit: number): Promise<BulkRow[]> {
  const inScope = 'tenantId' in scope
    ? sql`e.tenant_id = ${scope.tenantId}`
    : 'issuerId' in scope
      ? sql`c.issuer_id = ${scope.issuerId}`
      : sql`c.entity_id in (select m.entity_id from principal_group_members m where m.group_id = ${scope.principalGroupId})`;
  return sql<BulkRow[]>`
    select c.id, c.entity_id, c.identifier, c.issuer_id, e.tenant_id, c.metadata ->> 'fingerprint_sha256' as fingerprint_sha256,
      c.expires_at, c.status
    from credentials c join entities e on e.id = c.entity_id
    where c.kind = 'certificate' and ${inScope} and c.created_at <= ${snapshotAt} and c.id > ${afterId}
      and (c.status = 'active' or c.revoked_at >= ${snapshotAt})
    order by c.id limit ${limit}`;
}
