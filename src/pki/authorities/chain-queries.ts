// SQL of certificate chains as relying parties and TLS listeners need them, each bounded by the platform's
// authorities or one tenant's, never by the number of tenants: the active roots, the platform chain, one
// tenant's authorities by alias or id, and the authorities that may have signed a presented certificate.
import type { Queryable } from '../../db/client.js';
import type { AuthorityRow } from './authority-queries.js';

/** States in which an authority still vouches for the leaves below it (pending, failed and any other state do not). */
export const VOUCHING_STATES: ReadonlySet<string> = new Set(['active', 'retiring', 'retired']);

/** The active roots' certificates: the acceptable client CAs a TLS listener names. */
export async function selectActiveRoots(sql: Queryable): Promise<Buffer[]> {
  const rows = await sql<{ certificate_der: Buffer }[]>`
    select certificate_der from pki_authorities
    where kind = 'root' and status = 'active' and certificate_der is not null
    order by created_at, id`;
  return rows.map((r) => r.certificate_der);
}

/**
 * Active roots, then the platform intermediates and platform leaf issuers that still vouch for unexpired
 * leaves (active, retiring, retired), parents first: the trust bundle and the unlabelled EST cacerts.
 */
export async function selectPlatformChain(sql: Queryable): Promise<AuthorityRow[]> {
  return sql<AuthorityRow[]>`
    select * from pki_authorities
    where certificate_der is not null and (
      (kind = 'root' and status = 'active')
      or (kind in ('platform_intermediate', 'platform_leaf_issuer') and status in ('active', 'retiring', 'retired')
          and not_after > now()))
    order by case kind when 'root' then 0 when 'platform_intermediate' then 1 else 2 end, created_at, id`;
}

/**
 * The live tenant named by its id or alias (an id wins over an alias spelled like one), and its tenant
 * intermediates that still vouch for unexpired leaves, newest first. No rows: no such tenant, or no CA.
 */
export async function selectTenantAuthorities(sql: Queryable, label: { id: string | null; alias: string }): Promise<AuthorityRow[]> {
  return sql<AuthorityRow[]>`
    with tenant as (
      select id from tenants
      where deleted_at is null and (${label.id === null ? sql`false` : sql`id = ${label.id}`} or lower(alias) = ${label.alias.toLowerCase()})
      order by ${label.id === null ? sql`id` : sql`(id = ${label.id}) desc, id`}
      limit 1)
    select a.* from pki_authorities a join tenant t on a.tenant_id = t.id
    where a.kind = 'tenant_intermediate' and a.certificate_der is not null
      and a.status in ('active', 'retiring', 'retired') and a.not_after > now()
    order by a.version desc`;
}

/** Authorities whose subject key identifier (hex) or subject (RFC 4514) a certificate names as its issuer. */
export async function selectIssuerCandidates(sql: Queryable, keyIdHex: string | null, subject: string): Promise<AuthorityRow[]> {
  return sql<AuthorityRow[]>`
    select * from pki_authorities
    where certificate_der is not null and status <> 'failed'
      and (${keyIdHex === null ? sql`false` : sql`subject_key_id = ${keyIdHex}`} or subject = ${subject})
    limit 16`;
}
