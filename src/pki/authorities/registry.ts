// The issuers as the hot path needs them, cached per instance: each leaf issuer's parsed certificate,
// chain and the DER of the extensions every leaf it signs carries, plus profiles. Any change to an
// authority or profile drops the entries here and, through NOTIFY, on every other instance.
import { LRUCache } from 'lru-cache';
import type { Queryable } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import type { Logger } from '../../log.js';
import { selectActive, selectAuthority, type AuthorityRow } from './authority-queries.js';
import { readCertificate, type CertificateInfo } from '../issuance/certificate-info.js';
import { derToPem, signatureAlgorithmDer, type Der } from '../x509/der.js';
import {
  authorityInfoAccess, authorityKeyIdentifier, crlDistributionPoints, extendedKeyUsage, leafBasicConstraints, leafKeyUsage,
} from '../issuance/extensions.js';
import { DEFAULT_PROFILE_ID, selectProfile, type ProfileRow } from '../profiles/profile-queries.js';
import { effectiveExtendedKeyUsages } from '../profiles/profiles.js';
import { PUBLISHING_KINDS, type PublicationBase } from '../publication/publication-base.js';

export const CHANGED_TOPIC = 'pki.changed';

export interface Change {
  /** Tenants whose authorities changed; null stands for the platform's. */
  tenants?: (string | null)[];
  authorities?: string[];
  profiles?: string[];
  all?: boolean;
}

export interface IssuerContext {
  authority: AuthorityRow;
  info: CertificateInfo;
  signatureAlgorithm: Der;
  /** Extensions every leaf of this issuer carries: constraints, usage, AKI, AIA, CRL distribution point (current base). */
  leafExtensions: Der[];
  /** The issuer's certificate followed by its parents, without the root (what a TLS peer sends). */
  chainPem: string;
  rootId: string | null;
}

export interface ProfileContext {
  profile: ProfileRow;
  extendedKeyUsage: Der;
}

const PLATFORM = '-platform';

export function createRegistry(deps: {
  sql: Queryable; hub: NotifyHub; log: Logger; publicationBase: PublicationBase;
  /** SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED: off, every leaf is clientAuth only whatever its profile says. */
  extendedKeyUsagesEnabled: boolean;
}) {
  const { sql, hub, publicationBase } = deps;
  let generation = 0;
  const issuersById = new LRUCache<string, Promise<IssuerContext | null>>({ max: 20_000 });
  const activeByTenant = new LRUCache<string, Promise<string | null>>({ max: 50_000 });
  const profiles = new LRUCache<string, Promise<ProfileContext | null>>({ max: 10_000 });

  /** Caches a load only when nothing was invalidated while it ran (a racing change must win). */
  function cached<T>(cache: LRUCache<string, Promise<T>>, key: string, load: () => Promise<T>): Promise<T> {
    const hit = cache.get(key);
    if (hit) return hit;
    const gen = generation;
    const promise = load();
    cache.set(key, promise);
    promise.then((value) => {
      if (gen !== generation && cache.get(key) === promise) cache.delete(key);
      return value;
    }, () => {
      if (cache.get(key) === promise) cache.delete(key);
    });
    return promise;
  }

  async function chainOf(row: AuthorityRow): Promise<{ pem: string; rootId: string | null }> {
    let pem = '';
    let rootId: string | null = null;
    let current: AuthorityRow | undefined = row;
    for (let depth = 0; current && depth < 8; depth++) {
      if (current.kind === 'root') {
        rootId = current.id;
        break;
      }
      if (current.certificate_der) pem += derToPem(current.certificate_der, 'CERTIFICATE');
      current = current.parent_id ? await selectAuthority(sql, current.parent_id) : undefined;
    }
    return { pem, rootId };
  }

  async function loadIssuer(id: string): Promise<IssuerContext | null> {
    const row = await selectAuthority(sql, id);
    if (!row || !row.certificate_der || !row.key_algorithm) return null;
    const info = readCertificate(row.certificate_der, `authority ${row.id}`);
    const fixed = [leafBasicConstraints(), leafKeyUsage(), authorityKeyIdentifier(info.subjectKeyId)];
    const chain = await chainOf(row);
    let leafExtensions: Der[] | undefined;
    return {
      authority: row, info, signatureAlgorithm: signatureAlgorithmDer(row.key_algorithm), chainPem: chain.pem, rootId: chain.rootId,
      // The URLs as they are now, not as stored at the authority's creation (ocsp_url etc. are history): a
      // moved publication address reaches the leaves every issuer signs from then on. A change of base drops
      // these contexts (createPki). Built at the first issuance, not at load: an instance that knows no
      // publication address still verifies client certificates and publishes; only its issuance refuses.
      get leafExtensions() {
        if (!leafExtensions) {
          const urls = PUBLISHING_KINDS.has(row.kind) ? publicationBase.urlsFor(row.id) : null;
          leafExtensions = urls ? [...fixed, authorityInfoAccess(urls), crlDistributionPoints(urls)] : fixed;
        }
        return leafExtensions;
      },
    };
  }

  function drop(change: Change): void {
    generation++;
    if (change.all) {
      issuersById.clear();
      activeByTenant.clear();
      profiles.clear();
      return;
    }
    for (const t of change.tenants ?? []) activeByTenant.delete(t ?? PLATFORM);
    for (const id of change.authorities ?? []) issuersById.delete(id);
    for (const id of change.profiles ?? []) profiles.delete(id);
  }

  hub.subscribe(CHANGED_TOPIC, (payload) => drop(payload as Change));
  hub.onReconnect(() => drop({ all: true }));

  return {
    /** The issuer of leaves for entities of `tenantId` (null: global entities): the active leaf issuer, if any. */
    async activeIssuer(tenantId: string | null): Promise<IssuerContext | null> {
      const id = await cached(activeByTenant, tenantId ?? PLATFORM, async () => {
        const row = await selectActive(sql, tenantId === null ? 'platform_leaf_issuer' : 'tenant_intermediate', tenantId);
        return row?.id ?? null;
      });
      return id ? cached(issuersById, id, () => loadIssuer(id)) : null;
    },
    issuer(id: string): Promise<IssuerContext | null> {
      return cached(issuersById, id, () => loadIssuer(id));
    },
    /** The cached load of issuer `id` (the same promise issuer() answers), without starting one. */
    peekIssuer(id: string): Promise<IssuerContext | null> | undefined {
      return issuersById.get(id);
    },
    profile(id: string | null): Promise<ProfileContext | null> {
      const key = id ?? DEFAULT_PROFILE_ID;
      return cached(profiles, key, async () => {
        const profile = await selectProfile(sql, key);
        return profile ? { profile, extendedKeyUsage: extendedKeyUsage(effectiveExtendedKeyUsages(profile.extended_key_usages, deps.extendedKeyUsagesEnabled)) } : null;
      });
    },
    /** Drops the local entries now and tells the other instances (at commit, when given a transaction). */
    async changed(change: Change, tx?: Queryable): Promise<void> {
      drop(change);
      await hub.notify(CHANGED_TOPIC, change, tx);
    },
    dropLocal: drop,
  };
}

export type Registry = ReturnType<typeof createRegistry>;
