// The decision cache: per-subject grants, object and tenant facts, token ceilings and memoised decisions,
// each bounded by entries and bytes; invalidation by id, a generation counter against racing loads.
import { LRUCache } from 'lru-cache';
import type { Decision } from './types.js';
import type { Cached, Ceiling, CompiledPolicy, ObjectFacts, SubjectGrants, TenantFacts } from './model.js';

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
  readonly decisions: LRUCache<string, CachedDecision>;
  /** Bumped by every invalidation: a load that started before it must not be stored. */
  readonly generation: number;
  readonly ttlMs: number;
  /** Loads in flight, shared by concurrent callers; forgotten on invalidation. */
  dedupe<T>(key: string, load: () => Promise<T>): Promise<T>;
  /** Drops everything built from any of these ids (entities, groups, roles, blocks, grants, tenants, credentials). */
  dropIds(ids: Iterable<string>): number;
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

export function createAuthzCache(limits: CacheLimits): AuthzCache {
  // The byte budget is split so one kind of entry cannot starve the others.
  const share = (part: number) => Math.max(1024, Math.floor(limits.maxBytes * part));
  const markStale = (value: Cached) => {
    value.stale = true;
  };
  const grants = new LRUCache<string, SubjectGrants>({
    max: limits.subjects,
    maxSize: share(0.15),
    sizeCalculation: (g) => ENTRY_BYTES + g.refs.size * 80 + sizeOfJson(g.subject.view.attributes),
  });
  const policies = new LRUCache<string, CompiledPolicy>({
    max: limits.subjects,
    maxSize: share(0.35),
    sizeCalculation: (p) => ENTRY_BYTES + p.blocks.length * BLOCK_BYTES,
  });
  const objects = new LRUCache<string, ObjectFacts>({
    max: limits.objects,
    maxSize: share(0.25),
    sizeCalculation: (o) => ENTRY_BYTES + sizeOfJson(o.objectView.attributes) + (o.allGroups.size + o.ancestors.size) * 80,
  });
  const tenants = new LRUCache<string, TenantFacts>({ max: 100_000 });
  const ceilings = new LRUCache<string, Ceiling>({ max: limits.subjects });
  const decisions = new LRUCache<string, CachedDecision>({
    max: limits.decisions,
    maxSize: share(0.25),
    sizeCalculation: (d) => DECISION_BYTES + d.decision.blockIds.length * 80,
  });
  const pending = new Map<string, Promise<unknown>>();
  let generation = 0;
  let invalidations = 0;

  function dropWhere<V extends Cached & { refs?: Set<string> }>(cache: LRUCache<string, V>, ids: Set<string>): number {
    let dropped = 0;
    for (const [key, value] of cache.entries()) {
      let hit = ids.has(key);
      if (!hit && value.refs) for (const id of ids) if (value.refs.has(id)) { hit = true; break; }
      if (hit) {
        markStale(value);
        cache.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  return {
    grants, policies, objects, tenants, ceilings, decisions,
    get generation() {
      return generation;
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
      invalidations++;
      pending.clear();
      if (ids.size === 0) return 0;
      // Decisions are not scanned: each one checks the stale flags of the facts it was built from.
      // Policies first: subjects whose shared policy just went stale go with it.
      let dropped = dropWhere(policies, ids);
      for (const [key, g] of grants.entries()) {
        if (g.policy.stale) {
          markStale(g);
          grants.delete(key);
          dropped++;
        }
      }
      return dropped + dropWhere(grants, ids) + dropWhere(objects, ids) + dropWhere(tenants, ids) + dropWhere(ceilings, ids);
    },
    clear() {
      generation++;
      invalidations++;
      pending.clear();
      for (const cache of [grants, policies, objects, tenants, ceilings] as unknown as LRUCache<string, Cached>[]) {
        for (const value of cache.values()) markStale(value);
        cache.clear();
      }
      decisions.clear();
    },
    stats() {
      return {
        subjects: grants.size, policies: policies.size, objects: objects.size, tenants: tenants.size, ceilings: ceilings.size,
        decisions: decisions.size, bytes: grants.calculatedSize + policies.calculatedSize + objects.calculatedSize + decisions.calculatedSize,
        generation, invalidations,
      };
    },
  };
}
