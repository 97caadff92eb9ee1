// Certificate profiles: what a leaf may be (key algorithms, TTL bounds, extended key usages, SAN rules,
// renewal window), platform-wide or per tenant, and each issuer's default profile.
import { isIP } from 'node:net';
import type { AuditWriter } from '../../audit/index.js';
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import { conflict, forbidden, invalidInput, notFound } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess } from '../authorities/access.js';
import { selectAuthority, setDefaultProfile } from '../authorities/authority-queries.js';
import { EKU_NAMES, type ExtendedKeyUsageName } from '../issuance/extensions.js';
import { KEY_ALGORITHMS, type KeyAlgorithm } from '../keys/types.js';
import * as q from './profile-queries.js';

export type { ProfileRow } from './profile-queries.js';

const MAX_TTL = 10 * 365 * 86_400;
const DNS_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** GraphQL spells key algorithms with underscores (enum values); the CA contract with dashes. */
export const toKeyAlgorithm = (name: string) => name.replace('_', '-') as KeyAlgorithm;
export const fromKeyAlgorithm = (alg: KeyAlgorithm) => alg.replace('-', '_');

function seconds(field: string, value: unknown, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_TTL) {
    throw invalidInput(`${field} must be a whole number of seconds between 0 and ${MAX_TTL}`);
  }
  return value as number;
}

/**
 * The usages leaves of `profile` carry: what it names only while SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED is
 * on; otherwise clientAuth alone (SPEC.md), even for a profile stored with more while the switch was on.
 */
export function effectiveExtendedKeyUsages(stored: readonly ExtendedKeyUsageName[], widenEnabled: boolean): ExtendedKeyUsageName[] {
  return widenEnabled ? [...stored] : ['client_auth'];
}

/** Validated profile fields from GraphQL input, on top of `base` (the current profile when updating). */
export function profileFields(input: Record<string, unknown>, base?: q.ProfileRow, options: { extendedKeyUsagesEnabled: boolean } = { extendedKeyUsagesEnabled: false }): q.ProfileFields {
  const name = input.name === undefined && base ? base.name : v.name('name', input.name, 100);
  if (!/^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$/.test(name)) throw invalidInput('name must be letters, digits, spaces, _ . or -, starting with a letter or digit');
  const algorithms = input.keyAlgorithms === undefined || input.keyAlgorithms === null
    ? base?.key_algorithms ?? [...KEY_ALGORITHMS]
    : v.stringList('keyAlgorithms', input.keyAlgorithms, 6).map(toKeyAlgorithm);
  if (algorithms.length === 0 || algorithms.some((a) => !KEY_ALGORITHMS.includes(a))) {
    throw invalidInput(`keyAlgorithms must name at least one of ${KEY_ALGORITHMS.map(fromKeyAlgorithm).join(', ')}`);
  }
  const ekus = input.extendedKeyUsages === undefined || input.extendedKeyUsages === null
    ? base?.extended_key_usages ?? ['client_auth']
    : v.stringList('extendedKeyUsages', input.extendedKeyUsages, EKU_NAMES.length) as ExtendedKeyUsageName[];
  if (ekus.some((e) => !EKU_NAMES.includes(e))) throw invalidInput(`extendedKeyUsages must be among ${EKU_NAMES.join(', ')}`);
  const wider = input.extendedKeyUsages !== undefined && input.extendedKeyUsages !== null ? ekus.find((e) => e !== 'client_auth') : undefined;
  if (wider !== undefined && !options.extendedKeyUsagesEnabled) {
    throw invalidInput(`extendedKeyUsages: ${wider} is not allowed: leaves are client_auth only unless the platform sets `
      + 'SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED=true');
  }
  // Every leaf authenticates a client (SPEC.md): client_auth is always there.
  const extendedKeyUsages = [...new Set<ExtendedKeyUsageName>(['client_auth', ...ekus])];
  const rules = (input.sanRules ?? {}) as Record<string, unknown>;
  const dnsSuffixes = rules.dnsSuffixes === undefined || rules.dnsSuffixes === null
    ? base?.dns_suffixes ?? []
    : v.stringList('sanRules.dnsSuffixes', rules.dnsSuffixes, 100, 253).map((s) => s.toLowerCase().replace(/^\.+/, ''));
  const wrong = dnsSuffixes.find((s) => !DNS_NAME.test(s));
  if (wrong !== undefined) throw invalidInput(`sanRules.dnsSuffixes: '${wrong}' is not a DNS name`);
  const bool = (key: string, fallback: boolean) => {
    const value = rules[key];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') throw invalidInput(`sanRules.${key} must be a boolean`);
    return value;
  };
  const fields: q.ProfileFields = {
    name,
    description: 'description' in input ? v.optionalText('description', input.description, 1000) : base?.description ?? null,
    keyAlgorithms: [...new Set(algorithms)],
    minTtlSecs: seconds('minTtlSecs', input.minTtlSecs, base?.min_ttl_secs ?? 300),
    defaultTtlSecs: seconds('defaultTtlSecs', input.defaultTtlSecs, base?.default_ttl_secs ?? 2_592_000),
    maxTtlSecs: seconds('maxTtlSecs', input.maxTtlSecs, base?.max_ttl_secs ?? 31_536_000),
    extendedKeyUsages,
    allowDnsNames: bool('allowDnsNames', base?.allow_dns_names ?? false),
    allowIpAddresses: bool('allowIpAddresses', base?.allow_ip_addresses ?? false),
    dnsSuffixes,
    maxSanNames: rules.maxNames === undefined || rules.maxNames === null ? base?.max_san_names ?? 10 : seconds('sanRules.maxNames', rules.maxNames, 10),
    renewalWindowSecs: seconds('renewalWindowSecs', input.renewalWindowSecs, base?.renewal_window_secs ?? 604_800),
  };
  if (fields.minTtlSecs < 60) throw invalidInput('minTtlSecs must be at least 60');
  if (!(fields.minTtlSecs <= fields.defaultTtlSecs && fields.defaultTtlSecs <= fields.maxTtlSecs)) {
    throw invalidInput('TTL bounds must satisfy minTtlSecs <= defaultTtlSecs <= maxTtlSecs');
  }
  if (fields.maxSanNames > 100) throw invalidInput('sanRules.maxNames must be at most 100');
  return fields;
}

export interface RequestedNames {
  dnsNames: string[];
  ipAddresses: string[];
  uris: string[];
  emails: string[];
}

/** The SANs a leaf may carry under `profile`; anything it does not allow is refused by name. */
export function allowedNames(profile: q.ProfileRow, asked: RequestedNames): { dnsNames: string[]; ipAddresses: string[] } {
  if (asked.uris.length > 0) throw invalidInput(`URI subjectAltNames are set by the service (the identity URI); remove ${asked.uris[0]} from the CSR`);
  if (asked.emails.length > 0) throw invalidInput('email subjectAltNames are not issued; remove them from the CSR');
  const dnsNames = [...new Set(asked.dnsNames.map((d) => d.toLowerCase()))];
  const ipAddresses = [...new Set(asked.ipAddresses)];
  if (dnsNames.length > 0 && !profile.allow_dns_names) throw invalidInput(`certificate profile '${profile.name}' does not allow DNS names (asked for ${dnsNames[0]})`);
  if (ipAddresses.length > 0 && !profile.allow_ip_addresses) throw invalidInput(`certificate profile '${profile.name}' does not allow IP addresses (asked for ${ipAddresses[0]})`);
  if (dnsNames.length + ipAddresses.length > profile.max_san_names) {
    throw invalidInput(`certificate profile '${profile.name}' allows at most ${profile.max_san_names} DNS names and IP addresses`);
  }
  for (const d of dnsNames) {
    if (!DNS_NAME.test(d)) throw invalidInput(`'${d}' is not a DNS name`);
    if (profile.dns_suffixes.length > 0 && !profile.dns_suffixes.some((s) => d === s || d.endsWith(`.${s}`))) {
      throw invalidInput(`DNS name ${d} is outside the suffixes certificate profile '${profile.name}' allows (${profile.dns_suffixes.join(', ')})`);
    }
  }
  for (const ip of ipAddresses) if (!isIP(ip)) throw invalidInput(`'${ip}' is not an IP address`);
  return { dnsNames, ipAddresses };
}

export function createProfiles(deps: {
  sql: Sql; access: PkiAccess; audit: AuditWriter; changed: (profileId: string) => Promise<void>;
  /** SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED */
  extendedKeyUsagesEnabled: boolean;
}) {
  const { sql, access, audit } = deps;
  const options = { extendedKeyUsagesEnabled: deps.extendedKeyUsagesEnabled };

  async function load(id: unknown): Promise<q.ProfileRow> {
    const row = await q.selectProfile(sql, v.uuid('id', id));
    if (!row) throw notFound('certificate profile');
    return row;
  }

  /** A certificate profile by id for a change by `p`; none answers as access.missingAuthority says. */
  async function lookup(p: Principal, id: unknown, field = 'id'): Promise<q.ProfileRow> {
    const row = await q.selectProfile(sql, v.uuid(field, id));
    if (!row) throw await access.missingAuthority(p, 'certificate profile');
    return row;
  }

  const record = (p: Principal, event: string, tenantId: string | null, id: string, details: Record<string, unknown> = {}) =>
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind: 'certificate_profile', targetId: id, details });

  return {
    load,
    /** Platform profiles (templates every issuer may use) to any caller; a tenant's own to its readers. */
    async list(p: Principal, tenantId: unknown): Promise<q.ProfileRow[]> {
      const tenant = v.optionalUuid('tenantId', tenantId);
      if (tenant !== null && !(await access.mayReadTenant(p, tenant))) throw forbidden();
      return q.listProfiles(sql, tenant);
    },
    async get(p: Principal, id: unknown): Promise<q.ProfileRow> {
      const row = await load(id);
      if (row.tenant_id !== null && !(await access.mayReadTenant(p, row.tenant_id))) throw notFound('certificate profile');
      return row;
    },
    async create(p: Principal, input: Record<string, unknown>): Promise<q.ProfileRow> {
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      const fields = profileFields(input, undefined, options);
      await access.requireProvision(p, tenantId);
      const row = await q.insertProfile(sql, tenantId, fields, p.entityId);
      record(p, 'certificate_profile.create', tenantId, row.id, { name: row.name });
      return row;
    },
    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.ProfileRow> {
      const row = await lookup(p, id);
      await access.requireProvision(p, row.tenant_id);
      if ('tenantId' in input && input.tenantId !== undefined && input.tenantId !== row.tenant_id) throw invalidInput('a profile cannot move to another tenant');
      const updated = await q.updateProfile(sql, row.id, profileFields(input, row, options));
      record(p, 'certificate_profile.update', row.tenant_id, row.id, { fields: Object.keys(input) });
      await deps.changed(row.id);
      return updated;
    },
    async remove(p: Principal, id: unknown): Promise<boolean> {
      const row = await lookup(p, id);
      await access.requireProvision(p, row.tenant_id);
      if (row.is_system) throw invalidInput('the platform default profile cannot be deleted');
      if (await q.profileInUse(sql, row.id)) throw conflict('this profile is the default profile of an authority: choose another default first');
      await q.deleteProfile(sql, row.id);
      record(p, 'certificate_profile.delete', row.tenant_id, row.id, { name: row.name });
      await deps.changed(row.id);
      return true;
    },
    /** An issuer's default profile: a platform profile, or one of the issuer's own tenant. */
    async setDefault(p: Principal, authorityId: unknown, profileId: unknown) {
      const authority = await selectAuthority(sql, v.uuid('authorityId', authorityId));
      if (!authority) throw await access.missingAuthority(p, 'authority');
      await access.requireProvision(p, authority.tenant_id);
      if (authority.kind !== 'platform_leaf_issuer' && authority.kind !== 'tenant_intermediate') throw invalidInput('only leaf issuers have a default profile');
      const profile = await q.selectProfile(sql, v.uuid('profileId', profileId));
      const foreign = !!profile && profile.tenant_id !== null && profile.tenant_id !== authority.tenant_id;
      // Another tenant's profile the caller may not read reads as a missing one (in the authority's tenant).
      if (!profile || (foreign && !(await access.mayReadTenant(p, profile.tenant_id as string)))) {
        throw await access.missingAuthority(p, 'certificate profile', authority.tenant_id);
      }
      if (foreign) throw invalidInput("the profile belongs to another tenant than the authority's");
      await setDefaultProfile(sql, authority.id, profile.id);
      record(p, 'authority.default_profile', authority.tenant_id, authority.id, { profile_id: profile.id });
      await deps.changed(profile.id);
      return authority.id;
    },
  };
}

export type Profiles = ReturnType<typeof createProfiles>;
