// SQL of certificate credentials: the multi-row writes of an issuance batch (credentials, idempotency
// records, renewal links, outbox), and the reads behind the certificate queries and lookups.
import type postgres from 'postgres';
import type { Queryable } from '../../db/client.js';
import { selectRows } from '../../db/paging.js';

type PendingQuery = postgres.PendingQuery<postgres.Row[]>;

export interface CertificateMetadata {
  certificate_pem: string;
  subject: Record<string, string>;
  dns_names: string[];
  ip_addresses: string[];
  fingerprint_sha256: string;
  subject_key_id: string;
  issuer_fingerprint_sha256: string;
  profile_id: string;
  profile_name: string;
  identity_uri: string;
  tenant_id: string | null;
  key_algorithm: string;
  key_mode: 'csr' | 'generated';
  not_before: string;
  not_after: string;
  renewal_threshold_seconds: number;
  renewal_due_at: string;
  renewed_from_credential_id: string | null;
}

export interface CertificateRow {
  id: string;
  entity_id: string;
  identifier: string;
  issuer_id: string;
  status: 'active' | 'revoked';
  metadata: CertificateMetadata;
  expires_at: Date;
  created_at: Date;
  revoked_at: Date | null;
  revocation_reason: string | null;
  /** The owning tenant of the entity now (metadata.tenant_id is the one at issuance; they agree). */
  tenant_id: string | null;
}

const COLUMNS = 'c.id, c.entity_id, c.identifier, c.issuer_id, c.status, c.metadata, c.expires_at, c.created_at, c.revoked_at, c.revocation_reason, e.tenant_id';

export async function selectCertificate(sql: Queryable, id: string): Promise<CertificateRow | undefined> {
  const [row] = await sql<CertificateRow[]>`
    select ${sql.unsafe(COLUMNS)} from credentials c join entities e on e.id = c.entity_id
    where c.id = ${id} and c.kind = 'certificate'`;
  return row;
}

export async function selectCertificateForUpdate(sql: Queryable, id: string): Promise<CertificateRow | undefined> {
  const [row] = await sql<CertificateRow[]>`
    select ${sql.unsafe(COLUMNS)} from credentials c join entities e on e.id = c.entity_id
    where c.id = ${id} and c.kind = 'certificate' for update of c`;
  return row;
}

export async function selectByFingerprint(sql: Queryable, fingerprint: string): Promise<CertificateRow | undefined> {
  const [row] = await sql<CertificateRow[]>`
    select ${sql.unsafe(COLUMNS)} from credentials c join entities e on e.id = c.entity_id
    where c.kind = 'certificate' and c.metadata ? 'fingerprint_sha256' and (c.metadata ->> 'fingerprint_sha256') = ${fingerprint}`;
  return row;
}

export async function selectByIssuerSerial(sql: Queryable, issuerId: string, serial: string): Promise<CertificateRow | undefined> {
  const [row] = await sql<CertificateRow[]>`
    select ${sql.unsafe(COLUMNS)} from credentials c join entities e on e.id = c.entity_id
    where c.kind = 'certificate' and c.issuer_id = ${issuerId} and c.identifier = ${serial}`;
  return row;
}

/**
 * Certificates with this serial, under any issuer or the one given (credentials__certificate_serial); at most
 * `limit`, in no order (an ORDER BY issuer_id could lead the planner down credentials__certificate_issuer).
 */
export async function selectBySerial(sql: Queryable, serial: string, issuerId: string | null, limit: number): Promise<CertificateRow[]> {
  return sql<CertificateRow[]>`
    select ${sql.unsafe(COLUMNS)} from credentials c join entities e on e.id = c.entity_id
    where c.kind = 'certificate' and c.identifier = ${serial} ${issuerId ? sql`and c.issuer_id = ${issuerId}` : sql``}
    limit ${limit}`;
}

export interface CertificateFilter {
  entityId?: string;
  tenantId?: string;
  issuerId?: string;
  status?: 'active' | 'revoked' | 'expired';
  expiresFrom?: Date;
  expiresBefore?: Date;
  /** null: every tenant (platform grant); otherwise only entities owned by these tenants. */
  tenantIds: string[] | null;
}

export async function listCertificates(sql: Queryable, f: CertificateFilter, page: { limit: number; offset: number }) {
  const where = sql`
    where c.kind = 'certificate'
      ${f.entityId ? sql`and c.entity_id = ${f.entityId}` : sql``}
      ${f.tenantId ? sql`and e.tenant_id = ${f.tenantId}` : sql``}
      ${f.issuerId ? sql`and c.issuer_id = ${f.issuerId}` : sql``}
      ${f.status === 'active' ? sql`and c.status = 'active' and c.expires_at > now()` : sql``}
      ${f.status === 'expired' ? sql`and c.status = 'active' and c.expires_at <= now()` : sql``}
      ${f.status === 'revoked' ? sql`and c.status = 'revoked'` : sql``}
      ${f.expiresFrom ? sql`and c.expires_at >= ${f.expiresFrom}` : sql``}
      ${f.expiresBefore ? sql`and c.expires_at < ${f.expiresBefore}` : sql``}
      ${f.tenantIds === null ? sql`` : sql`and e.tenant_id = any(${f.tenantIds}::uuid[])`}`;
  // The page and its total in one round trip (db/paging.ts).
  return selectRows<CertificateRow & Record<string, unknown>>(sql, {
    columns: sql.unsafe(COLUMNS),
    from: sql`from credentials c join entities e on e.id = c.entity_id ${where}`,
    order: sql`c.created_at desc, c.id`,
  }, page);
}

export interface IssuanceRecord {
  scopeId: string;
  operation: 'issue_csr' | 'issue_generated' | 'renew_csr' | 'renew_generated';
  idempotencyKey: string;
  requestHash: string;
}

export async function selectIssuanceRecord(sql: Queryable, scopeId: string, operation: IssuanceRecord['operation'], key: string) {
  const [row] = await sql<{ request_hash: string; credential_id: string }[]>`
    select request_hash, credential_id from certificate_issuance_requests
    where scope_id = ${scopeId} and operation = ${operation} and idempotency_key = ${key}`;
  return row;
}

export interface IssueContext {
  id: string;
  kind: 'human' | 'device' | 'service' | 'workload' | 'application';
  name: string;
  tenant_id: string | null;
  status: string;
  deleted: boolean;
  tenant_status: string | null;
  /** The idempotency record of (entity, operation, key), when the key was used before. */
  prior_hash: string | null;
  prior_credential_id: string | null;
}

export interface IssueContextKey {
  entityId: string;
  operation: IssuanceRecord['operation'];
  key: string | null;
}

/**
 * What issuances read before signing, for many at once (one statement for the requests that arrive
 * together): each subject, its tenant, and a prior use of the idempotency key. In the order asked; null
 * for an entity that does not exist.
 */
export async function selectIssueContexts(sql: Queryable, keys: IssueContextKey[]): Promise<(IssueContext | null)[]> {
  const rows = await sql<(IssueContext & { i: number })[]>`
    select r.i, e.id, e.kind, e.name, e.tenant_id, e.status, e.deleted_at is not null as deleted, t.status as tenant_status,
      p.request_hash as prior_hash, p.credential_id as prior_credential_id
    from jsonb_to_recordset(${sql.json(keys.map((k, i) => ({ i, ...k })) as never)}) as r(i int, "entityId" uuid, operation text, key text)
      join entities e on e.id = r."entityId"
      left join tenants t on t.id = e.tenant_id
      left join certificate_issuance_requests p on p.scope_id = e.id and p.operation = r.operation and p.idempotency_key = r.key`;
  const out: (IssueContext | null)[] = keys.map(() => null);
  for (const { i, ...row } of rows) out[i] = row;
  return out;
}

export interface RenewContextKey {
  credentialId: string;
  operation: IssuanceRecord['operation'];
  key: string | null;
}

export interface RenewContext {
  source: CertificateRow;
  entity: IssueContext;
  /** The certificate that replaced the source, when it was renewed already. */
  replacement_id: string | null;
}

/**
 * What a renewal reads before signing, for many at once: the certificate, its entity and tenant, a prior
 * use of the idempotency key on that certificate, and the certificate that replaced it if any. In the
 * order asked; null for a credential that is not a certificate.
 */
export async function selectRenewContexts(sql: Queryable, keys: RenewContextKey[]): Promise<(RenewContext | null)[]> {
  const rows = await sql<(CertificateRow & { i: number; kind: IssueContext['kind']; name: string; entity_status: string; deleted: boolean;
    tenant_status: string | null; prior_hash: string | null; prior_credential_id: string | null; replacement_id: string | null })[]>`
    select r.i, ${sql.unsafe(COLUMNS)}, e.kind, e.name, e.status as entity_status, e.deleted_at is not null as deleted,
      t.status as tenant_status, p.request_hash as prior_hash, p.credential_id as prior_credential_id,
      n.replacement_credential_id as replacement_id
    from jsonb_to_recordset(${sql.json(keys.map((k, i) => ({ i, ...k })) as never)}) as r(i int, "credentialId" uuid, operation text, key text)
      join credentials c on c.id = r."credentialId" and c.kind = 'certificate'
      join entities e on e.id = c.entity_id
      left join tenants t on t.id = e.tenant_id
      left join certificate_issuance_requests p on p.scope_id = c.id and p.operation = r.operation and p.idempotency_key = r.key
      left join certificate_renewals n on n.previous_credential_id = c.id`;
  const out: (RenewContext | null)[] = keys.map(() => null);
  for (const row of rows) {
    const { i, kind, name, entity_status, deleted, tenant_status, prior_hash, prior_credential_id, replacement_id, ...source } = row;
    out[i] = {
      source,
      entity: { id: source.entity_id, kind, name, tenant_id: source.tenant_id, status: entity_status, deleted, tenant_status, prior_hash, prior_credential_id },
      replacement_id,
    };
  }
  return out;
}

export interface NewCertificate {
  id: string;
  entity_id: string;
  identifier: string;
  issuer_id: string;
  metadata: CertificateMetadata;
  expires_at: string;
  created_by: string | null;
}

export interface IssuanceRows {
  certificates: NewCertificate[];
  records: (IssuanceRecord & { credentialId: string })[];
  renewals: { previous: string; replacement: string }[];
  outbox: OutboxRecord[];
}

/**
 * Every row of a batch of issuances in ONE statement (data-modifying WITH clauses): one round trip, and,
 * run outside a transaction, atomic on its own. `extra` are further inserts or updates as queries not yet
 * run (the audit events, a renewal's revocation), placed in the same statement.
 */
export async function writeIssuances(sql: Queryable, rows: IssuanceRows, extra: PendingQuery[]): Promise<void> {
  const more = extra.reduce((acc, q, i) => sql`${acc}, ${sql(`x${i}`)} as (${q})`, sql``);
  const issuerIds = [...new Set(rows.certificates.map((c) => c.issuer_id))];
  // The issuers are read FOR SHARE, with the predicate of an authority that issues, in this statement:
  // revokeAuthority (and a retirement's UPDATE) takes the row for update, so either it commits first and
  // this statement re-reads the row, now refused, or it waits for this commit and revokes these leaves.
  // A refused issuer leaves its certificate's issuer_id null, which credentials__certificate_has_issuer
  // rejects: the whole statement fails (nothing of it is written) and the batcher retries each issuance
  // alone, so only those under the refused issuer fail (ISSUER_REFUSED_CONSTRAINT, mapped by issuance.ts).
  await sql`
    with a as (
      select id from pki_authorities where id = any(${issuerIds}::uuid[]) and issuance_enabled and revoked_at is null
      for share
    ), c as (
      insert into credentials (id, entity_id, kind, identifier, issuer_id, status, metadata, expires_at, created_by)
      select r.id, r.entity_id, 'certificate', r.identifier, a.id, 'active', r.metadata, r.expires_at, r.created_by
      from jsonb_to_recordset(${sql.json(rows.certificates as never)}) as r(
        id uuid, entity_id uuid, identifier text, issuer_id uuid, metadata jsonb, expires_at timestamptz, created_by uuid)
        left join a on a.id = r.issuer_id
    ), q as (
      insert into certificate_issuance_requests (scope_id, operation, idempotency_key, request_hash, credential_id)
      select r."scopeId", r.operation, r."idempotencyKey", r."requestHash", r."credentialId"
      from jsonb_to_recordset(${sql.json(rows.records as never)}) as r("scopeId" uuid, operation text, "idempotencyKey" text, "requestHash" text, "credentialId" uuid)
    ), o as (${outboxInsert(sql, rows.outbox)})
    ${rows.renewals.length === 0 ? sql`` : sql`, n as (
      insert into certificate_renewals (previous_credential_id, replacement_credential_id)
      select r.previous, r.replacement from jsonb_to_recordset(${sql.json(rows.renewals as never)}) as r(previous uuid, replacement uuid))`}
    ${more}
    select 1`;
}

/** The constraint an issuance write fails with when its issuer was revoked or stopped issuing meanwhile. */
export const ISSUER_REFUSED_CONSTRAINT = 'credentials__certificate_has_issuer';

export interface OutboxRecord {
  event: string;
  tenantId: string | null;
  payload: Record<string, unknown>;
}

export async function insertOutbox(sql: Queryable, rows: OutboxRecord[]): Promise<void> {
  if (rows.length > 0) await outboxInsert(sql, rows);
}

/** The outbox insert as a query not yet run (awaited alone, or placed in a larger statement). */
export function outboxInsert(sql: Queryable, rows: OutboxRecord[]) {
  return sql`
    insert into event_outbox (event, tenant_id, payload)
    select r.event, r."tenantId", r.payload from jsonb_to_recordset(${sql.json(rows as never)}) as r(event text, "tenantId" uuid, payload jsonb)`;
}
