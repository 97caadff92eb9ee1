// Certificate chains, each O(1) in the number of tenants: the active roots (the acceptable client CAs a
// TLS listener names), the platform chain (root, platform intermediate, platform leaf issuer: the trust
// bundle and the unlabelled EST cacerts), one tenant's chain by its alias or id (labelled EST cacerts),
// and authorities by id for walking a chain upwards. Cached per instance; an authority change drops the
// entries here and, through the pki.changed NOTIFY, on every other instance. Labels are also re-read
// after LABEL_TTL_MS, so a renamed alias answers for its new tenant within that bound.
import { LRUCache } from 'lru-cache';
import type { Queryable } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import * as v from '../../validate.js';
import { selectAuthority, type AuthorityRow } from './authority-queries.js';
import { selectActiveRoots, selectPlatformChain, selectTenantAuthorities } from './chain-queries.js';
import { CHANGED_TOPIC } from './registry.js';

const LABEL_TTL_MS = 60_000;
const RANK = { root: 0, platform_intermediate: 1, platform_leaf_issuer: 2, tenant_intermediate: 3 } as const;
/** RFC 7030 3.2.2: a label is one path segment; ours are tenant aliases or ids. */
const LABEL = /^[A-Za-z0-9._~-]{1,128}$/;

export interface TenantChain {
  tenantId: string;
  /** The default certificate profile of the tenant's newest authority (EST csrattrs). */
  defaultProfileId: string | null;
  /** Root first, then the platform intermediates the tenant's authorities hang under, then those authorities. */
  ders: Buffer[];
}

export function createChains(deps: { sql: Queryable; hub: NotifyHub }) {
  const { sql, hub } = deps;
  let generation = 0;
  const byId = new LRUCache<string, Promise<AuthorityRow | null>>({ max: 20_000 });
  const labels = new LRUCache<string, Promise<TenantChain | null>>({ max: 10_000, ttl: LABEL_TTL_MS });
  let roots: Promise<Buffer[]> | null = null;

  /** Caches a load only when nothing changed while it ran (a racing change must win), and never a failure. */
  function cached<T>(cache: LRUCache<string, Promise<T>>, key: string, load: () => Promise<T>): Promise<T> {
    const hit = cache.get(key);
    if (hit) return hit;
    const gen = generation;
    const promise = load();
    cache.set(key, promise);
    promise.then(() => {
      if (gen !== generation && cache.get(key) === promise) cache.delete(key);
    }, () => {
      if (cache.get(key) === promise) cache.delete(key);
    });
    return promise;
  }

  function drop(): void {
    generation++;
    byId.clear();
    labels.clear();
    roots = null;
  }
  const unsubscribe = [hub.subscribe(CHANGED_TOPIC, drop), hub.onReconnect(drop)];

  const authority = (id: string) => cached(byId, id, async () => (await selectAuthority(sql, id)) ?? null);

  async function loadTenant(label: string): Promise<TenantChain | null> {
    const own = await selectTenantAuthorities(sql, { id: v.isUuid(label) ? label : null, alias: label });
    const newest = own[0];
    if (!newest || newest.tenant_id === null) return null;
    // Parents of every version (a retired version may hang under an older platform intermediate), root first.
    const parents: AuthorityRow[] = [];
    const seen = new Set(own.map((a) => a.id));
    for (const a of own) {
      const above: AuthorityRow[] = [];
      let parentId = a.parent_id;
      for (let depth = 0; parentId && depth < 8 && !seen.has(parentId); depth++) {
        const parent = await authority(parentId);
        if (!parent) break;
        seen.add(parent.id);
        above.unshift(parent);
        parentId = parent.parent_id;
      }
      parents.push(...above);
    }
    parents.sort((a, b) => RANK[a.kind] - RANK[b.kind]);
    const ders = [...parents, ...own.slice().reverse()].flatMap((a) => (a.certificate_der ? [a.certificate_der] : []));
    return { tenantId: newest.tenant_id, defaultProfileId: newest.default_profile_id, ders };
  }

  return {
    authority,
    /** Active roots' DER (never empty while the certificate authority is configured). */
    roots(): Promise<Buffer[]> {
      if (roots) return roots;
      const gen = generation;
      const loading = selectActiveRoots(sql);
      roots = loading;
      loading.then(() => {
        if (gen !== generation && roots === loading) roots = null;
      }, () => {
        if (roots === loading) roots = null;
      });
      return loading;
    },
    /** The platform chain, uncached (the publication caches the trust bundle it becomes). */
    platform: () => selectPlatformChain(sql),
    /** One tenant's chain by alias or id; null for a malformed label, an unknown tenant and a tenant without a CA alike. */
    tenant(label: string): Promise<TenantChain | null> {
      if (!LABEL.test(label)) return Promise.resolve(null);
      return cached(labels, label.toLowerCase(), () => loadTenant(label));
    },
    close(): void {
      for (const u of unsubscribe) u();
    },
  };
}

export type Chains = ReturnType<typeof createChains>;
