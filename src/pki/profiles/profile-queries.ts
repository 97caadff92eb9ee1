// SQL of certificate profiles (certificate_profiles).
import type { Queryable } from '../../db/client.js';
import type { ExtendedKeyUsageName } from '../issuance/extensions.js';
import type { KeyAlgorithm } from '../keys/types.js';

export const DEFAULT_PROFILE_ID = '00000000-0000-0000-0000-0000000000c1';

export interface ProfileRow {
  id: string;
  tenant_id: string | null;
  name: string;
  description: string | null;
  key_algorithms: KeyAlgorithm[];
  min_ttl_secs: number;
  default_ttl_secs: number;
  max_ttl_secs: number;
  extended_key_usages: ExtendedKeyUsageName[];
  allow_dns_names: boolean;
  allow_ip_addresses: boolean;
  dns_suffixes: string[];
  max_san_names: number;
  renewal_window_secs: number;
  is_system: boolean;
  created_at: Date;
  updated_at: Date | null;
}

export interface ProfileFields {
  name: string;
  description: string | null;
  keyAlgorithms: KeyAlgorithm[];
  minTtlSecs: number;
  defaultTtlSecs: number;
  maxTtlSecs: number;
  extendedKeyUsages: ExtendedKeyUsageName[];
  allowDnsNames: boolean;
  allowIpAddresses: boolean;
  dnsSuffixes: string[];
  maxSanNames: number;
  renewalWindowSecs: number;
}

export async function selectProfile(sql: Queryable, id: string): Promise<ProfileRow | undefined> {
  const [row] = await sql<ProfileRow[]>`select * from certificate_profiles where id = ${id}`;
  return row;
}

/** The platform's profiles and, with a tenant, that tenant's too. */
export async function listProfiles(sql: Queryable, tenantId: string | null): Promise<ProfileRow[]> {
  return sql<ProfileRow[]>`
    select * from certificate_profiles
    where tenant_id is null ${tenantId === null ? sql`` : sql`or tenant_id = ${tenantId}`}
    order by tenant_id nulls first, lower(name)`;
}

export async function insertProfile(sql: Queryable, tenantId: string | null, f: ProfileFields, createdBy: string): Promise<ProfileRow> {
  const [row] = await sql<ProfileRow[]>`
    insert into certificate_profiles (tenant_id, name, description, key_algorithms, min_ttl_secs, default_ttl_secs, max_ttl_secs,
      extended_key_usages, allow_dns_names, allow_ip_addresses, dns_suffixes, max_san_names, renewal_window_secs, created_by)
    values (${tenantId}, ${f.name}, ${f.description}, ${f.keyAlgorithms}, ${f.minTtlSecs}, ${f.defaultTtlSecs}, ${f.maxTtlSecs},
      ${f.extendedKeyUsages}, ${f.allowDnsNames}, ${f.allowIpAddresses}, ${f.dnsSuffixes}, ${f.maxSanNames}, ${f.renewalWindowSecs}, ${createdBy})
    returning *`;
  return row as ProfileRow;
}

export async function updateProfile(sql: Queryable, id: string, f: ProfileFields): Promise<ProfileRow> {
  const [row] = await sql<ProfileRow[]>`
    update certificate_profiles set name = ${f.name}, description = ${f.description}, key_algorithms = ${f.keyAlgorithms},
      min_ttl_secs = ${f.minTtlSecs}, default_ttl_secs = ${f.defaultTtlSecs}, max_ttl_secs = ${f.maxTtlSecs},
      extended_key_usages = ${f.extendedKeyUsages}, allow_dns_names = ${f.allowDnsNames}, allow_ip_addresses = ${f.allowIpAddresses},
      dns_suffixes = ${f.dnsSuffixes}, max_san_names = ${f.maxSanNames}, renewal_window_secs = ${f.renewalWindowSecs}, updated_at = now()
    where id = ${id} returning *`;
  return row as ProfileRow;
}

export async function deleteProfile(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`delete from certificate_profiles where id = ${id} and not is_system returning id`;
  return rows.length === 1;
}

export async function profileInUse(sql: Queryable, id: string): Promise<boolean> {
  const [row] = await sql<{ used: boolean }[]>`select exists (select 1 from pki_authorities where default_profile_id = ${id}) as used`;
  return row?.used === true;
}
