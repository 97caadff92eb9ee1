// Loading the engine's facts: each loader answers from the cache when it can, otherwise reads PostgreSQL
// once for all concurrent callers and stores the result unless an invalidation happened meanwhile.
import type { Queryable } from '../db/client.js';
import type { AuthzCache } from './cache.js';
import {
  bindingsOf, blockIdsOf, compileCatalog, compileCeiling, compileGrants, compileObject, compilePolicy, compileSubject, compileTenant,
  grantRefsOf, grantsByPart, POLICY_REF, policySignature, setPart, type ActionCatalog,
} from './compile.js';
import type { Ceiling, CompiledPolicy, ObjectFacts, SubjectGrants, SubjectTenants, TenantFacts } from './model.js';
import {
  selectActionCatalog, selectBlocks, selectCeiling, selectConnectedTenants, selectGrants, selectGrantsInTenants, selectObject, selectSubject,
  selectTenant, type GrantRow,
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
    if (hit && hit.reload.size === 0) return Promise.resolve(hit);
    return cache.dedupe(`s:${subjectId}`, () => (hit ? reloadParts(hit) : loadAllGrants(subjectId)));
  }

  /**
   * Compiled parts for grant rows, by part key: a part already compiled is found by its signature, the
   * others read their blocks, all in one statement. Stored unless an invalidation by id happened since
   * `idGen` (a part's signature comes from the rows just read, so only a changed block can make it wrong).
   */
  async function partsOf(grantRows: readonly GrantRow[], expiresAt: number, idGen: number): Promise<Map<string, CompiledPolicy>> {
    const parts = new Map<string, CompiledPolicy>();
    const missing: { key: string; rows: GrantRow[]; signature: string }[] = [];
    for (const [key, rows] of grantsByPart(grantRows)) {
      // The signature comes from the grants just read, block ids included: a role that gained or lost a
      // block has a new signature at once, whether or not its invalidation has arrived yet.
      const signature = policySignature(rows);
      const part = fresh(cache.policies.get(signature));
      if (part) parts.set(key, part);
      else missing.push({ key, rows, signature });
    }
    if (missing.length === 0) return parts;
    const blocks = await selectBlocks(sql, blockIdsOf(missing.flatMap((m) => m.rows)));
    for (const m of missing) {
      const part = compilePolicy(bindingsOf(m.rows, blocks), m.signature, expiresAt);
      if (cache.idGeneration === idGen && usable()) cache.policies.set(m.signature, part);
      parts.set(m.key, part);
    }
    return parts;
  }

  async function loadAllGrants(subjectId: string): Promise<SubjectGrants | null> {
    const gen = cache.generation;
    const idGen = cache.idGeneration;
    const [row, grantRows] = await Promise.all([selectSubject(sql, subjectId), selectGrants(sql, subjectId)]);
    if (!row) return null;
    const expiresAt = now() + cache.ttlMs;
    const parts = await partsOf(grantRows, expiresAt, idGen);
    const grants = compileGrants(compileSubject(row, expiresAt), grantRows, parts, expiresAt);
    // A part evicted while the others were stored could no longer be reached by an invalidation.
    if (storable(gen) && ![...parts.values()].some((p) => p.stale)) cache.grants.set(subjectId, grants);
    return grants;
  }

  /**
   * The parts of a cached subject marked for reload (cache.reloadGrants): only their grants and blocks are
   * read, and they replace the old parts in place. Anything else that changed meanwhile, or a part gone
   * before it was kept, and the subject is read in full instead.
   */
  async function reloadParts(hit: SubjectGrants): Promise<SubjectGrants | null> {
    const subjectId = hit.subject.id;
    const idGen = cache.idGeneration;
    const wanted = [...hit.reload];
    const rows = await selectGrantsInTenants(sql, subjectId, wanted.map(([tenantId]) => tenantId));
    const parts = await partsOf(rows, now() + cache.ttlMs, idGen);
    const intact = cache.idGeneration === idGen && usable() && cache.grants.peek(subjectId) === hit && !hit.stale;
    if (!intact || [...parts.values()].some((p) => p.stale)) return loadAllGrants(subjectId);
    const refs = grantRefsOf(rows, new Set());
    for (const [tenantId, stamp] of wanted) {
      // Changed again since it was read: it stays marked, and is read again below.
      if (hit.reload.get(tenantId) !== stamp) continue;
      hit.reload.delete(tenantId);
      const part = parts.get(tenantId);
      setPart(hit, tenantId, part);
      if (part) refs.add(POLICY_REF + part.signature);
    }
    for (const id of refs) hit.refs.add(id);
    cache.addGrantRefs(subjectId, refs);
    hit.version++;
    return hit.reload.size === 0 ? hit : reloadParts(hit);
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
