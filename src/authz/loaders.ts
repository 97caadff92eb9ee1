// Loading the engine's facts: each loader answers from the cache when it can, otherwise reads PostgreSQL
// once for all concurrent callers and stores the result unless an invalidation happened meanwhile.
import type { Queryable } from '../db/client.js';
import type { AuthzCache } from './cache.js';
import {
  bindingsOf, blockIdsOf, compileCatalog, compileCeiling, compileGrants, compileObject, compilePolicy, compileSubject, compileTenant,
  policySignature, type ActionCatalog,
} from './compile.js';
import type { Ceiling, CompiledPolicy, ObjectFacts, SubjectGrants, SubjectTenants, TenantFacts } from './model.js';
import {
  selectActionCatalog, selectBlocks, selectCeiling, selectConnectedTenants, selectGrants, selectObject, selectSubject, selectTenant,
} from './queries.js';

export interface Loaders {
  catalog(): Promise<ActionCatalog>;
  /** The catalog if loaded (the synchronous fast path never waits for it). */
  readonly loadedCatalog: ActionCatalog | undefined;
  resetCatalog(): void;
  /** Fresh and not stale, or undefined. */
  fresh<V extends { stale: boolean; expiresAt: number }>(value: V | undefined): V | undefined;
  grants(subjectId: string): Promise<SubjectGrants | null>;
  policyForExplain(subjectId: string): Promise<CompiledPolicy>;
  object(kind: string, id: string): Promise<ObjectFacts | null>;
  tenant(id: string): Promise<TenantFacts | null>;
  ceiling(credentialId: string): Promise<Ceiling>;
  connections(subjectId: string): Promise<SubjectTenants>;
  /** True when a load that started at generation `gen` may be stored. */
  storable(gen: number): boolean;
}

export function createLoaders(deps: { sql: Queryable; cache: AuthzCache; now: () => number; usable: () => boolean }): Loaders {
  const { sql, cache, now, usable } = deps;
  const storable = (gen: number) => cache.generation === gen && usable();
  let catalog: ActionCatalog | undefined;
  let catalogLoad: Promise<ActionCatalog> | undefined;

  function loadCatalog(): Promise<ActionCatalog> {
    if (catalog) return Promise.resolve(catalog);
    const gen = cache.generation;
    return (catalogLoad ??= selectActionCatalog(sql).then((rows) => {
      const loaded = compileCatalog(rows);
      catalogLoad = undefined;
      if (cache.generation === gen) catalog = loaded;
      return loaded;
    }, (err: unknown) => {
      catalogLoad = undefined;
      throw err;
    }));
  }

  /** Fresh and not stale, or undefined. */
  function fresh<V extends { stale: boolean; expiresAt: number }>(value: V | undefined): V | undefined {
    return value && !value.stale && value.expiresAt > now() && usable() ? value : undefined;
  }

  function loadGrants(subjectId: string): Promise<SubjectGrants | null> {
    const hit = fresh(cache.grants.get(subjectId));
    if (hit && !hit.policy.stale) return Promise.resolve(hit);
    return cache.dedupe(`s:${subjectId}`, async () => {
      const gen = cache.generation;
      const [row, grantRows] = await Promise.all([selectSubject(sql, subjectId), selectGrants(sql, subjectId)]);
      if (!row) return null;
      const expiresAt = now() + cache.ttlMs;
      // The signature comes from the grants just read, block ids included: a role that gained or lost a
      // block has a new signature at once, whether or not its invalidation has arrived yet.
      const signature = policySignature(grantRows);
      let policy = fresh(cache.policies.get(signature));
      if (!policy) {
        // Only a policy not compiled yet reads its blocks: subjects sharing a role share its policy.
        const blocks = await selectBlocks(sql, blockIdsOf(grantRows));
        policy = compilePolicy(bindingsOf(grantRows, blocks), signature, expiresAt);
        if (storable(gen)) cache.policies.set(signature, policy);
      }
      const grants = compileGrants(compileSubject(row, expiresAt), grantRows, policy, Math.min(expiresAt, policy.expiresAt));
      if (storable(gen)) cache.grants.set(subjectId, grants);
      return grants;
    });
  }

  /** Explain reads the bindings afresh: it reports assignment ids, which shared policies do not keep. */
  async function loadPolicyForExplain(subjectId: string): Promise<CompiledPolicy> {
    const grants = await selectGrants(sql, subjectId);
    return compilePolicy(bindingsOf(grants, await selectBlocks(sql, blockIdsOf(grants))), '', now());
  }

  function loadObject(kind: string, id: string): Promise<ObjectFacts | null> {
    const hit = fresh(cache.objects.get(id));
    if (hit && hit.kind === kind) return Promise.resolve(hit);
    return cache.dedupe(`o:${kind}:${id}`, async () => {
      const gen = cache.generation;
      const row = await selectObject(sql, kind, id);
      if (!row) return null;
      const facts = compileObject(row, now() + cache.ttlMs);
      if (storable(gen)) cache.objects.set(id, facts);
      return facts;
    });
  }

  function loadTenant(id: string): Promise<TenantFacts | null> {
    const hit = fresh(cache.tenants.get(id));
    if (hit) return Promise.resolve(hit);
    return cache.dedupe(`t:${id}`, async () => {
      const gen = cache.generation;
      const row = await selectTenant(sql, id);
      if (!row) return null;
      const facts = compileTenant(row, now() + cache.ttlMs);
      if (storable(gen)) cache.tenants.set(id, facts);
      return facts;
    });
  }

  function loadCeiling(credentialId: string): Promise<Ceiling> {
    const hit = fresh(cache.ceilings.get(credentialId));
    if (hit) return Promise.resolve(hit);
    return cache.dedupe(`c:${credentialId}`, async () => {
      const gen = cache.generation;
      const ceiling = compileCeiling(credentialId, await selectCeiling(sql, credentialId), now() + cache.ttlMs);
      if (storable(gen)) cache.ceilings.set(credentialId, ceiling);
      return ceiling;
    });
  }

  function loadConnections(subjectId: string): Promise<SubjectTenants> {
    const hit = fresh(cache.connections.get(subjectId));
    if (hit) return Promise.resolve(hit);
    return cache.dedupe(`n:${subjectId}`, async () => {
      const gen = cache.generation;
      const rows = await selectConnectedTenants(sql, subjectId);
      const connections: SubjectTenants = {
        stale: false, expiresAt: now() + cache.ttlMs,
        tenantIds: rows.filter((r) => !r.deleted).map((r) => r.id),
        refs: new Set([subjectId, ...rows.map((r) => r.id)]),
      };
      if (storable(gen)) cache.connections.set(subjectId, connections);
      return connections;
    });
  }

  return {
    catalog: loadCatalog,
    get loadedCatalog() {
      return catalog;
    },
    resetCatalog() {
      catalog = undefined;
      catalogLoad = undefined;
    },
    fresh,
    grants: loadGrants,
    policyForExplain: loadPolicyForExplain,
    object: loadObject,
    tenant: loadTenant,
    ceiling: loadCeiling,
    connections: loadConnections,
    storable,
  };
}
