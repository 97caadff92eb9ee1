// The decision cache: per-subject grants, object and tenant facts, token ceilings and memoised decisions,
// each bounded by entries and bytes; invalidation by id through an index of what each entry was built
// from, a generation counter against racing loads.
import { LRUCache } from 'lru-cache';
import { createIndexedLru, type IndexedLru } from '../indexed-lru.js';
import { POLICY_REF } from './compile.js';
import type { Decision } from './types.js';
import type { Cached, Ceiling, CompiledPolicy, ObjectFacts, SubjectGrants, SubjectTenants, TenantFacts } from './model.js';

export interface CacheLimits {
  subjects: number;
  objects: number;
  decisions: number;
  maxBytes: number;
  ttlMs: number;
}

/** A memoised decision stays valid while every fact it was computed from is neither stale nor expired. */
export interface CachedDecision {
  decision: Decision;
  grants: SubjectGrants;
  /** grants.version when it was computed: a part reloaded since makes it invalid. */
  grantsVersion: number;
  facts: ObjectFacts | null;
  tenant: TenantFacts | null;
  ceiling: Ceiling | null;
  expiresAt: number;
}

export interface AuthzCache {
  readonly grants: LRUCache<string, SubjectGrants>;
  /** Compiled policies by grant signature, shared between subjects. */
  readonly policies: LRUCache<string, CompiledPolicy>;
  readonly objects: LRUCache<string, ObjectFacts>;
  readonly tenants: LRUCache<string, TenantFacts>;
  readonly ceilings: LRUCache<string, Ceiling>;
  /** Connected tenants by subject id: dropped by the subject's invalidations and any of its tenants'. */
  readonly connections: LRUCache<string, SubjectTenants>;
  readonly decisions: LRUCache<string, CachedDecision>;
  /** Bumped by every invalidation: a load that started before it must not be stored. */
  readonly generation: number;
  /**
   * Bumped by every invalidation but reloadGrants: a part reload that started before it must not be stored
   * (one that started before a reloadGrants is checked against that subject's reload stamps instead).
   */
  readonly idGeneration: number;
  readonly ttlMs: number;
  /** Loads in flight, shared by concurrent callers; forgotten on invalidation. */
  dedupe<T>(key: string, load: () => Promise<T>): Promise<T>;
  /** Drops everything built from any of these ids (entities, groups, roles, blocks, grants, tenants, credentials). */
  dropIds(ids: Iterable<string>): number;
  /**
   * The grants these subjects hold through assignments and direct policies of these tenants changed:
   * their cached grants stay, with those tenants' parts marked for reload (and every memoised decision
   * of theirs invalid); their connected tenants are dropped.
   */
  reloadGrants(entityIds: readonly string[], tenantIds: readonly string[]): void;
  /** Indexes ids added to a cached subject's refs by a part reload. */
  addGrantRefs(subjectId: string, ids: Iterable<string>): void;
  clear(): void;
  stats(): CacheStats;
}

export interface CacheStats {
  subjects: number;
  policies: number;
  objects: number;
  tenants: number;
  ceilings: number;
  decisions: number;
  bytes: number;
  generation: number;
  invalidations: number;
}

// Rough per-entry byte costs: enough to bound memory, not an exact accounting.
const BLOCK_BYTES = 600;
const ENTRY_BYTES = 400;
const DECISION_BYTES = 300;

function sizeOfJson(value: unknown): number {
  return value && typeof value === 'object' ? JSON.stringify(value).length * 2 : 0;
}

/**
 * A fact cache found by the ids its entries were built from. An entry that leaves it for any reason
 * (evicted for room, replaced, dropped) is marked stale: no invalidation can reach it any more, so a
 * memoised decision still holding it must not trust it.
 */
function factCache<V extends Cached>(
  options: LRUCache.Options<string, V, unknown>, refsOf: (value: V) => Iterable<string>, onLeave?: (value: V, reason: LRUCache.DisposeReason) => void,
): IndexedLru<V> {
  return createIndexedLru<V>({ ...options, refsOf, onLeave: (value, reason) => {
    value.stale = true;
    onLeave?.(value, reason);
  } });
}

const NO_REFS: string[] = [];

export function createAuthzCache(limits: CacheLimits): AuthzCache {
  // The byte budget is split so one kind of entry cannot starve the others.
  const share = (part: number) => Math.max(1024, Math.floor(limits.maxBytes * part));
  const grants = factCache<SubjectGrants>({
    max: limits.subjects,
    maxSize: share(0.15),
    sizeCalculation: (g) => ENTRY_BYTES + g.refs.size * 80 + sizeOfJson(g.subject.view.attributes),
  }, (g) => g.refs);
  // Grants are found by the signature of each shared part they hold ('policy:<signature>' in their refs).
  // A part that leaves for room (or is replaced) takes its holders along: checking every part of a
  // subject on every use would cost what the subject holds, and no invalidation could reach it any more.
  // (dropIds drops the holders of the parts it drops itself.)
  const policies = factCache<CompiledPolicy>({
    max: limits.subjects,
    maxSize: share(0.35),
    sizeCalculation: (p) => ENTRY_BYTES + p.blocks.length * BLOCK_BYTES,
  }, (p) => p.refs, (p, reason) => {
    if (reason !== 'delete') grants.drop([POLICY_REF + p.signature]);
  });
  const objects = factCache<ObjectFacts>({
    max: limits.objects,
    maxSize: share(0.25),
    sizeCalculation: (o) => ENTRY_BYTES + sizeOfJson(o.objectView.attributes) + (o.allGroups.size + o.ancestors.size) * 80,
  }, (o) => o.refs);
  const tenants = factCache<TenantFacts>({ max: 100_000 }, () => NO_REFS);
  const ceilings = factCache<Ceiling>({ max: limits.subjects }, (c) => c.refs);
  const connections = factCache<SubjectTenants>({ max: limits.subjects }, (c) => c.refs);
  const facts = [grants, policies, objects, tenants, ceilings, connections];
  const decisions = new LRUCache<string, CachedDecision>({
    max: limits.decisions,
    maxSize: share(0.25),
    sizeCalculation: (d) => DECISION_BYTES + d.decision.blockIds.length * 80,
  });
  const pending = new Map<string, Promise<unknown>>();
  let generation = 0;
  let idGeneration = 0;
  let invalidations = 0;
  let reloadStamp = 0;

  return {
    grants: grants.cache, policies: policies.cache, objects: objects.cache, tenants: tenants.cache, ceilings: ceilings.cache,
    connections: connections.cache, decisions,
    get generation() {
      return generation;
    },
    get idGeneration() {
      return idGeneration;
    },
    ttlMs: limits.ttlMs,
    dedupe<T>(key: string, load: () => Promise<T>): Promise<T> {
      const existing = pending.get(key);
      if (existing) return existing as Promise<T>;
      const started = load().finally(() => {
        if (pending.get(key) === started) pending.delete(key);
      });
      pending.set(key, started);
      return started;
    },
    dropIds(input) {
      const ids = new Set(input);
      generation++;
      idGeneration++;
      invalidations++;
      pending.clear();
      if (ids.size === 0) return 0;
      // Decisions are not scanned: each one checks the stale flags of the facts it was built from.
      // Policies first: subjects holding a shared policy that just went stale go with it.
      const stalePolicies = policies.drop(ids);
      for (const p of stalePolicies) ids.add(POLICY_REF + p.signature);
      return stalePolicies.length + grants.drop(ids).length + objects.drop(ids).length + tenants.drop(ids).length + ceilings.drop(ids).length
        + connections.drop(ids).length;
    },
    reloadGrants(entityIds, tenantIds) {
      generation++;
      invalidations++;
      pending.clear();
      for (const id of entityIds) {
        const g = grants.cache.peek(id);
        if (!g) continue;
        for (const t of tenantIds) g.reload.set(t, ++reloadStamp);
        g.version++;
      }
      // The tenants a subject reaches follow its assignments.
      connections.drop(entityIds);
    },
    addGrantRefs(subjectId, ids) {
      grants.addRefs(subjectId, ids);
    },
    clear() {
      generation++;
      idGeneration++;
      invalidations++;
      pending.clear();
      for (const { cache } of facts) cache.clear();
      decisions.clear();
    },
    stats() {
      return {
        subjects: grants.cache.size, policies: policies.cache.size, objects: objects.cache.size, tenants: tenants.cache.size,
        ceilings: ceilings.cache.size, decisions: decisions.size,
        bytes: grants.cache.calculatedSize + policies.cache.calculatedSize + objects.cache.calculatedSize + decisions.calculatedSize,
        generation, invalidations,
      };
    },
  };
}
