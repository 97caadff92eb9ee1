// SQL of the authorities (pki_authorities): reads, inserts, status transitions and the locks that keep
// one active authority per tenant (or per platform kind) across instances.
import type { Queryable } from '../../db/client.js';
import type { KeyAlgorithm, KeyBackendKind, StoredKeyRef } from '../keys/types.js';

export const AUTHORITY_KINDS = ['root', 'platform_intermediate', 'platform_leaf_issuer', 'tenant_intermediate'] as const;
export type AuthorityKind = (typeof AUTHORITY_KINDS)[number];
export const AUTHORITY_STATUSES = ['pending', 'active', 'retiring', 'retired', 'failed'] as const;
export type AuthorityStatus = (typeof AUTHORITY_STATUSES)[number];

export interface AuthorityRow {
  id: string;
  tenant_id: string | null;
  parent_id: string | null;
  kind: AuthorityKind;
  version: number;
  status: AuthorityStatus;
  issuance_enabled: boolean;
  subject: string;
  serial_number: string | null;
  fingerprint_sha256: string | null;
  subject_key_id: string | null;
  authority_key_id: string | null;
  certificate_der: Buffer | null;
  csr_pem: string | null;
  key_backend: KeyBackendKind | null;
  key_ref: StoredKeyRef | null;
  key_algorithm: KeyAlgorithm | null;
  provisioning_mode: 'config' | 'automatic' | 'manual';
  failure_reason: string | null;
  default_profile_id: string | null;
  ocsp_url: string | null;
  ca_issuers_url: string | null;
  crl_distribution_point_url: string | null;
  not_before: Date | null;
  not_after: Date | null;
  created_by: string | null;
  created_at: Date;
  activated_at: Date | null;
  retiring_at: Date | null;
  retired_at: Date | null;
  updated_at: Date | null;
  /** Revoked (compromised): issues nothing, its leaves are refused; its certificate is in its parent's CRL. */
  revoked_at: Date | null;
  revocation_reason: string | null;
  revoked_by: string | null;
}

export async function selectAuthority(sql: Queryable, id: string): Promise<AuthorityRow | undefined> {
  const [row] = await sql<AuthorityRow[]>`select * from pki_authorities where id = ${id}`;
  return row;
}

export async function selectAuthorityForUpdate(sql: Queryable, id: string): Promise<AuthorityRow | undefined> {
  const [row] = await sql<AuthorityRow[]>`select * from pki_authorities where id = ${id} for update`;
  return row;
}

/** Every authority that is not failed: the in-memory registry of issuers, chains and trust anchors. */
export async function selectLiveAuthorities(sql: Queryable): Promise<AuthorityRow[]> {
  return sql<AuthorityRow[]>`select * from pki_authorities where status <> 'failed' order by created_at, id`;
}

/** tenantId undefined: every authority; null: the platform's; a tenant: that tenant's. */
export async function listAuthorities(sql: Queryable, tenantId: string | null | undefined, tenantIds: string[] | null): Promise<AuthorityRow[]> {
  return sql<AuthorityRow[]>`
    select * from pki_authorities
    where true
      ${tenantId === undefined ? sql`` : tenantId === null ? sql`and tenant_id is null` : sql`and tenant_id = ${tenantId}`}
      ${tenantIds === null ? sql`` : sql`and (tenant_id = any(${tenantIds}::uuid[]))`}
    order by tenant_id nulls first, kind, version desc`;
}

export async function selectActive(sql: Queryable, kind: AuthorityKind, tenantId: string | null): Promise<AuthorityRow | undefined> {
  const [row] = await sql<AuthorityRow[]>`
    select * from pki_authorities where kind = ${kind} and status = 'active'
      and ${tenantId === null ? sql`tenant_id is null` : sql`tenant_id = ${tenantId}`}`;
  return row;
}

export async function selectByFingerprint(sql: Queryable, fingerprint: string): Promise<AuthorityRow | undefined> {
  const [row] = await sql<AuthorityRow[]>`select * from pki_authorities where fingerprint_sha256 = ${fingerprint}`;
  return row;
}

export async function nextVersion(sql: Queryable, kind: AuthorityKind, tenantId: string | null): Promise<number> {
  const [row] = await sql<{ v: number }[]>`
    select coalesce(max(version), 0) + 1 as v from pki_authorities
    where kind = ${kind} and ${tenantId === null ? sql`tenant_id is null` : sql`tenant_id = ${tenantId}`}`;
  return (row as { v: number }).v;
}

/**
 * Serialises provisioning of one tenant's (or the platform's) authorities across instances for the rest
 * of the transaction: checks and the insert that follows happen under it.
 */
export async function lockScope(sql: Queryable, scope: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`pki:${scope}`}, 0))`;
}

export interface NewAuthority {
  tenantId: string | null;
  parentId: string | null;
  kind: AuthorityKind;
  version: number;
  status: AuthorityStatus;
  issuanceEnabled: boolean;
  subject: string;
  serialNumber: string | null;
  fingerprintSha256: string | null;
  subjectKeyId: string | null;
  authorityKeyId: string | null;
  certificateDer: Buffer | null;
  csrPem: string | null;
  keyBackend: KeyBackendKind | null;
  keyRef: StoredKeyRef | null;
  keyAlgorithm: KeyAlgorithm | null;
  provisioningMode: 'config' | 'automatic' | 'manual';
  failureReason: string | null;
  defaultProfileId: string | null;
  urls: { ocspUrl: string; caIssuersUrl: string; crlDistributionPointUrl: string } | null;
  notBefore: Date | null;
  notAfter: Date | null;
  createdBy: string | null;
}

export async function insertAuthority(sql: Queryable, id: string, a: NewAuthority): Promise<AuthorityRow> {
  const [row] = await sql<AuthorityRow[]>`
    insert into pki_authorities (
      id, tenant_id, parent_id, kind, version, status, issuance_enabled, subject, serial_number, fingerprint_sha256, subject_key_id,
      authority_key_id, certificate_der, csr_pem, key_backend, key_ref, key_algorithm, provisioning_mode, failure_reason, default_profile_id,
      ocsp_url, ca_issuers_url, crl_distribution_point_url, not_before, not_after, created_by, activated_at)
    values (
      ${id}, ${a.tenantId}, ${a.parentId}, ${a.kind}, ${a.version}, ${a.status}, ${a.issuanceEnabled}, ${a.subject}, ${a.serialNumber},
      ${a.fingerprintSha256}, ${a.subjectKeyId}, ${a.authorityKeyId}, ${a.certificateDer}, ${a.csrPem}, ${a.keyBackend},
      ${a.keyRef === null ? null : sql.json(a.keyRef as never)}, ${a.keyAlgorithm}, ${a.provisioningMode}, ${a.failureReason},
      ${a.defaultProfileId}, ${a.urls?.ocspUrl ?? null}, ${a.urls?.caIssuersUrl ?? null}, ${a.urls?.crlDistributionPointUrl ?? null},
      ${a.notBefore}, ${a.notAfter}, ${a.createdBy}, ${a.status === 'active' ? sql`now()` : null})
    returning *`;
  return row as AuthorityRow;
}

/** pending → active. */
export async function activate(sql: Queryable, id: string): Promise<void> {
  await sql`
    update pki_authorities set status = 'active', issuance_enabled = kind <> 'root', activated_at = now(), updated_at = now()
    where id = ${id}`;
}

/** active → retiring: no new leaves; CRL and OCSP go on. */
export async function beginRetirement(sql: Queryable, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`
    update pki_authorities set status = 'retiring', issuance_enabled = false, retiring_at = now(), updated_at = now()
    where id = any(${ids}::uuid[]) and status = 'active'`;
}

/** active or retiring → retired (retired versions still answer CRL and OCSP). */
export async function completeRetirement(sql: Queryable, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`
    update pki_authorities set status = 'retired', issuance_enabled = false, retiring_at = coalesce(retiring_at, now()),
      retired_at = now(), updated_at = now()
    where id = any(${ids}::uuid[]) and status in ('active', 'retiring', 'pending')`;
}

export async function setDefaultProfile(sql: Queryable, id: string, profileId: string): Promise<void> {
  await sql`update pki_authorities set default_profile_id = ${profileId}, updated_at = now() where id = ${id}`;
}

/** Live tenants without an active tenant intermediate: what automatic provisioning still owes. */
export async function tenantsWithoutIssuer(sql: Queryable, limit: number): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select t.id from tenants t
    where t.deleted_at is null and not exists (
      select 1 from pki_authorities a where a.tenant_id = t.id and a.kind = 'tenant_intermediate' and a.status = 'active')
      -- a revoked authority's successor is an administrator's decision, never automatic
      and not coalesce((select a.revoked_at is not null from pki_authorities a where a.tenant_id = t.id and a.kind = 'tenant_intermediate'
        and a.status <> 'failed' order by a.version desc limit 1), false)
    order by t.created_at, t.id limit ${limit}`;
  return rows.map((r) => r.id);
}

/** Revocation of an authority: it stops issuing and, if it was in use, is retired (it keeps publishing its CRL). */
export async function markAuthorityRevoked(sql: Queryable, id: string, reason: string, at: Date, actor: string | null): Promise<void> {
  await sql`
    update pki_authorities set revoked_at = ${at}, revocation_reason = ${reason}, revoked_by = ${actor}, issuance_enabled = false,
      status = case when status in ('pending', 'active', 'retiring') then 'retired' else status end,
      retired_at = case when status in ('pending', 'active', 'retiring') then ${at} else retired_at end, updated_at = now()
    where id = ${id}`;
}

/** The newest version of a leaf issuer of the scope (failed attempts aside), to tell a revoked one from none. */
export async function selectNewest(sql: Queryable, kind: AuthorityKind, tenantId: string | null): Promise<AuthorityRow | undefined> {
  const [row] = await sql<AuthorityRow[]>`
    select * from pki_authorities where kind = ${kind} and status <> 'failed'
      and ${tenantId === null ? sql`tenant_id is null` : sql`tenant_id = ${tenantId}`}
    order by version desc limit 1`;
  return row;
}
