// The decision procedure: load (or reuse) subject grants, object and tenant facts and the token ceiling,
// then evaluate blocks in memory. Default deny; a matching deny beats any allow.
import { invalidInput } from '../errors.js';
import type { Queryable } from '../db/client.js';
import type { AuthzCache, CachedDecision } from './cache.js';
import { kindFacts, type ActionCatalog } from './compile.js';
import { conditionsHold, type ConditionInput } from './conditions.js';
import type { ActionIndex, Ceiling, CompiledBlock, CompiledPolicy, ObjectFacts, SubjectFacts, SubjectGrants, TenantFacts } from './model.js';
import { createLoaders } from './loaders.js';
import { scopeContains } from './scope.js';
import { OBJECT_KINDS, type AuthorizeRequest, type Decision } from './types.js';

const KINDS: ReadonlySet<string> = new Set(OBJECT_KINDS);
const NO_BLOCKS: string[] = [];

/** Everything a decision is computed from, or the decision already reached while gathering it. */
export type Gathered =
  | { done: true; decision: Decision; cacheable: boolean; grants: SubjectGrants | null; facts: ObjectFacts | null; tenant: TenantFacts | null }
  | { done: false; grants: SubjectGrants; facts: ObjectFacts; tenant: TenantFacts | null; ceiling: Ceiling | null; catalog: ActionCatalog };

export interface Evaluation {
  decision: Decision;
  /** True when a context-dependent condition took part: such decisions are never memoised. */
  contextual: boolean;
}

/** Decisions the engine answered, and how its decision memo did: plain numbers the metrics read. */
export interface DecisionTally {
  allowed: number;
  denied: number;
  /** Lookups in the decision memo answered from it, and those that had to compute (or could not use it). */
  hits: number;
  misses: number;
}

export interface Engine {
  readonly tally: DecisionTally;
  authorize(request: AuthorizeRequest): Promise<Decision>;
  /** The memoised decision, synchronously, or undefined (then call authorize): the hot path's shortcut. */
  peek(request: AuthorizeRequest): Decision | undefined;
  /** The memo key of a request: callers that ask the same question again and again build it once. */
  keyOf(request: AuthorizeRequest): string;
  /** peek by a key from keyOf (a string the caller keeps also keeps its hash: nothing is rebuilt or rehashed). */
  peekKey(key: string): Decision | undefined;
  /** Cached facts of an object, synchronously, or undefined when not cached. */
  peekObject(kind: string, id: string): ObjectFacts | undefined;
  /** authorize without the decision memo (benchmarks measure evaluation with cached facts this way). */
  authorizeUncached(request: AuthorizeRequest): Promise<Decision>;
  gather(request: AuthorizeRequest): Promise<Gathered>;
  catalog(): Promise<ActionCatalog>;
  conditionInput(g: { grants: SubjectGrants; facts: ObjectFacts; tenant: TenantFacts | null }, context: Record<string, unknown> | undefined): ConditionInput;
  /** The same evaluation authorize runs, on facts already gathered (explain annotates it). */
  evaluate(request: AuthorizeRequest, gathered: Extract<Gathered, { done: false }>): Evaluation;
  /** The subject's blocks read afresh, with the assignment ids of every path (explain). */
  policyForExplain(subjectId: string): Promise<CompiledPolicy>;
  /** The subject's facts (id, kind, tenant, status), loading its grants as a decision would; null when unknown. */
  subject(subjectId: string): Promise<SubjectFacts | null>;
  /** The subject's cached facts, synchronously, or undefined when not cached. */
  peekSubject(subjectId: string): SubjectFacts | undefined;
  /**
   * The live tenants a subject is connected to (home, role assignments direct or through principal groups,
   * active memberships), cached and dropped by the invalidations of the subject and of those tenants.
   */
  connectedTenants(subjectId: string): Promise<readonly string[]>;
  /** Facts of one object (cached like the decision path's), or null when it does not exist. */
  objectFacts(kind: string, id: string): Promise<ObjectFacts | null>;
  /** Clears the loaded action catalog (actions or applicability changed). */
  resetCatalog(): void;
}

function deny(reason: string, details?: Record<string, unknown>): Decision {
  return Object.freeze(details ? { allowed: false, reason, blockIds: NO_BLOCKS, details } : { allowed: false, reason, blockIds: NO_BLOCKS });
}

/** The memo key: context is not part of it, because context-dependent decisions are never memoised. */
function decisionKey(r: AuthorizeRequest): string {
  const o = r.object;
  const objectKey = o.id === null ? `${o.kind}@${o.tenantId ?? ''}` : o.tenantId === undefined ? o.id : `${o.id}@${o.tenantId ?? ''}`;
  let key = r.ceilingCredentialId
    ? `${r.subjectId}\n${r.action}\n${o.kind}\n${objectKey}\n${r.ceilingCredentialId}`
    : `${r.subjectId}\n${r.action}\n${o.kind}\n${objectKey}`;
  if (r.subjectVisibleIn !== undefined) key = `${key}\nvisible-in:${r.subjectVisibleIn}`;
  return r.readingFrozenTenant === true ? `${key}\nfrozen-read` : key;
}

function validateRequest(r: AuthorizeRequest): void {
  if (typeof r.subjectId !== 'string' || r.subjectId === '') throw invalidInput('subject id is required');
  if (typeof r.action !== 'string' || r.action === '') throw invalidInput('action is required');
  const o = r.object;
  if (!o || typeof o.kind !== 'string' || !KINDS.has(o.kind)) {
    throw invalidInput(`unknown object kind '${String(o?.kind)}'; expected one of ${OBJECT_KINDS.join(', ')}`);
  }
  if (o.id !== null && (typeof o.id !== 'string' || o.id === '')) throw invalidInput('object id must be a non-empty string or null');
  if (r.context !== undefined && r.context !== null && (typeof r.context !== 'object' || Array.isArray(r.context))) {
    throw invalidInput('context must be a JSON object');
  }
}

export function createEngine(deps: { sql: Queryable; cache: AuthzCache; now?: () => number; cacheUsable?: () => boolean }): Engine {
  const { sql, cache } = deps;
  const now = deps.now ?? Date.now;
  // False while invalidations cannot reach this instance (LISTEN connection down): read and store nothing.
  const usable = deps.cacheUsable ?? (() => true);
  const load = createLoaders({ sql, cache, now, usable });
  const { fresh, storable } = load;
  const tally: DecisionTally = { allowed: 0, denied: 0, hits: 0, misses: 0 };
  /** A decision answered from the memo (counted here, so callers of peek pay nothing more). */
  function served(decision: Decision): Decision {
    tally.hits++;
    if (decision.allowed) tally.allowed++;
    else tally.denied++;
    return decision;
  }

  async function gather(r: AuthorizeRequest): Promise<Gathered> {
    validateRequest(r);
    const actions = await load.catalog();
    // A question about an action that does not exist, or (below) one that cannot apply to the object, is
    // answered like any other: denied, with the reason naming it (a caller asks, it is not a bad request).
    if (!actions.has(r.action)) {
      return { done: true, decision: deny(`unknown action '${r.action}'`, { action: r.action }), cacheable: false, grants: null, facts: null, tenant: null };
    }
    let grants = await load.grants(r.subjectId);
    // Another tenant's subject, to an asker confined to this tenant: the very answer of an unknown one.
    const hidden = r.subjectVisibleIn !== undefined && grants !== null && grants.subject.tenantId !== null && grants.subject.tenantId !== r.subjectVisibleIn;
    if (hidden) grants = null;
    if (!grants) return { done: true, decision: deny('subject not found', { subject_id: r.subjectId }), cacheable: false, grants, facts: null, tenant: null };
    if (grants.subject.status !== 'active') {
      return { done: true, decision: deny('subject is not active', { subject_id: r.subjectId, subject_status: grants.subject.status }), cacheable: true, grants, facts: null, tenant: null };
    }
    const o = r.object;
    let facts = o.id === null ? kindFacts(o.kind, o.tenantId ?? null) : await load.object(o.kind, o.id);
    // An explicit tenantId on a ref with an id re-homes the object for this question: tenant lifecycle asks
    // about T as a platform-level object, so T's own tenant-scope blocks do not match (types.ts, ObjectRef).
    if (facts && o.id !== null && o.tenantId !== undefined && o.tenantId !== facts.tenantId) facts = { ...facts, tenantId: o.tenantId };
    if (!facts) {
      return { done: true, decision: deny(`${o.kind} not found`, { object_kind: o.kind, object_id: o.id }), cacheable: false, grants, facts, tenant: null };
    }
    // Applicability validates and never grants: a pair that can never be allowed is denied, naming why.
    if (!actions.applies(r.action, facts.kind, facts.type)) {
      const details = { action: r.action, object_kind: facts.kind, object_type: facts.type };
      return { done: true, decision: deny(`action '${r.action}' is not valid for ${facts.type ?? facts.kind}`, details), cacheable: true, grants, facts, tenant: null };
    }
    let tenant: TenantFacts | null = null;
    if (facts.tenantId !== null) {
      tenant = await load.tenant(facts.tenantId);
      if (!tenant) return { done: true, decision: deny('tenant not found', { tenant_id: facts.tenantId }), cacheable: false, grants, facts, tenant };
      // Freezing locks operations but keeps data readable: management reads say so and pass a frozen tenant.
      const readable = tenant.status === 'frozen' && r.readingFrozenTenant === true;
      if (tenant.status !== 'active' && !readable) {
        return { done: true, decision: deny(`tenant is ${tenant.status}`, { tenant_id: tenant.id, tenant_status: tenant.status }), cacheable: true, grants, facts, tenant };
      }
    }
    const ceiling = r.ceilingCredentialId ? await load.ceiling(r.ceilingCredentialId) : null;
    return { done: false, grants, facts, tenant, ceiling, catalog: actions };
  }

  function conditionInput(g: { grants: SubjectGrants; facts: ObjectFacts; tenant: TenantFacts | null }, context: Record<string, unknown> | undefined): ConditionInput {
    return { entity: g.grants.subject.view, object: g.facts.objectView, resource: g.facts.resourceView, tenant: g.tenant?.view, context: context ?? undefined };
  }

  /** The ceiling allows when the token is usable, belongs to the subject and one of its rules covers the request. */
  function ceilingAllows(ceiling: Ceiling, r: AuthorizeRequest, g: Extract<Gathered, { done: false }>, out: { contextual: boolean }): boolean {
    if (!ceiling.usable || ceiling.entityId !== r.subjectId) return false;
    if (ceiling.credentialExpiresAt !== null && ceiling.credentialExpiresAt <= now()) return false;
    let input: ConditionInput | undefined;
    for (const rule of ceiling.rules) {
      if (!rule.actions.has(r.action) || !scopeContains(rule, g.facts)) continue;
      if (rule.conditions) {
        if (rule.conditions.usesContext) out.contextual = true;
        if (!conditionsHold(rule.conditions, (input ??= conditionInput(g, r.context)))) continue;
      }
      return true;
    }
    return false;
  }

  function evaluate(r: AuthorizeRequest, g: Extract<Gathered, { done: false }>): Evaluation {
    const flags = { contextual: false };
    if (g.ceiling && !ceilingAllows(g.ceiling, r, g, flags)) {
      return { decision: deny('denied by access token permission ceiling', { credential_id: g.ceiling.credentialId }), contextual: flags.contextual };
    }
    // Only the parts that can contain the object: those bound to its tenant, and the unbound ones. A deny
    // in any of them decides; allows are gathered from all (once each: a block may reach two parts).
    const grants = g.grants;
    const facts = g.facts;
    const bound = facts.tenantId !== null ? grants.byTenant.get(facts.tenantId) : undefined;
    let allows: string[] | null = null;
    let input: ConditionInput | undefined;
    for (let set = 0; set < 2; set++) {
      const parts = set === 0 ? grants.everywhere : bound;
      if (!parts) continue;
      for (let p = 0; p < parts.length; p++) {
        const policy = parts[p] as CompiledPolicy;
        const index: ActionIndex = policy.byAction.get(r.action) ?? policy.allActionsIndex;
        const exact = facts.id !== null ? index.exact.get(facts.id) : undefined;
        for (let pass = 0; pass < 2; pass++) {
          const list = pass === 0 ? exact : index.scan;
          if (!list) continue;
          for (let i = 0; i < list.length; i++) {
            const b = list[i] as CompiledBlock;
            if (!scopeContains(b, facts)) continue;
            if (b.conditions) {
              const contextual = b.conditions.usesContext;
              if (contextual) flags.contextual = true;
              if (!conditionsHold(b.conditions, (input ??= conditionInput(g, r.context)))) continue;
              // A matching deny that needs no context decides alone, whatever else took part.
              if (b.effect === 'deny') return { decision: Object.freeze({ allowed: false, reason: b.denyReason, blockIds: [b.id] }), contextual };
            } else if (b.effect === 'deny') {
              return { decision: Object.freeze({ allowed: false, reason: b.denyReason, blockIds: [b.id] }), contextual: false };
            }
            if (!allows) allows = [b.id];
            else if (!allows.includes(b.id)) allows.push(b.id);
          }
        }
      }
    }
    if (allows) return { decision: Object.freeze({ allowed: true, reason: 'allowed', blockIds: allows }), contextual: flags.contextual };
    return { decision: deny('no matching allow policy'), contextual: flags.contextual };
  }

  async function decideSlow(r: AuthorizeRequest, key: string | null): Promise<Decision> {
    const gen = cache.generation;
    const g = await gather(r);
    let decision: Decision;
    let cacheable: boolean;
    let ceiling: Ceiling | null = null;
    if (g.done) {
      decision = g.decision;
      cacheable = g.cacheable;
    } else {
      const e = evaluate(r, g);
      decision = e.decision;
      cacheable = !e.contextual;
      ceiling = g.ceiling;
    }
    tally.misses++;
    if (decision.allowed) tally.allowed++;
    else tally.denied++;
    if (key !== null && cacheable && g.grants && storable(gen)) {
      const expiresAt = Math.min(g.grants.expiresAt, g.facts?.expiresAt ?? Infinity, g.tenant?.expiresAt ?? Infinity,
        ceiling?.expiresAt ?? Infinity, ceiling?.credentialExpiresAt ?? Infinity);
      cache.decisions.set(key, { decision, grants: g.grants, grantsVersion: g.grants.version, facts: g.facts, tenant: g.tenant, ceiling, expiresAt });
    }
    return decision;
  }

  function valid(hit: CachedDecision): boolean {
    return !hit.grants.stale && hit.grants.version === hit.grantsVersion && !(hit.facts?.stale) && !(hit.tenant?.stale) && !(hit.ceiling?.stale) && hit.expiresAt > now();
  }

  function peekKey(key: string): Decision | undefined {
    if (!usable()) return undefined;
    const hit = cache.decisions.get(key);
    // A miss is not counted: the caller goes on to authorize, which counts it.
    return hit && valid(hit) ? served(hit.decision) : undefined;
  }

  return {
    tally,
    peek: (r) => peekKey(decisionKey(r)),
    keyOf: decisionKey,
    peekKey,
    peekObject(kind, id) {
      const hit = fresh(cache.objects.get(id));
      return hit && hit.kind === kind ? hit : undefined;
    },
    authorize(r) {
      let key: string | null = null;
      if (usable() && typeof r.subjectId === 'string' && typeof r.action === 'string' && r.object) {
        key = decisionKey(r);
        const hit = cache.decisions.get(key);
        if (hit && valid(hit)) return Promise.resolve(served(hit.decision));
      }
      return decideSlow(r, key);
    },
    async authorizeUncached(r) {
      const g = await gather(r);
      return g.done ? g.decision : evaluate(r, g).decision;
    },
    gather,
    evaluate,
    objectFacts: load.object,
    subject: async (id) => (await load.grants(id))?.subject ?? null,
    peekSubject(id) {
      const hit = fresh(cache.grants.get(id));
      return hit?.subject;
    },
    policyForExplain: load.policyForExplain,
    connectedTenants: async (id) => (await load.connections(id)).tenantIds,
    catalog: load.catalog,
    conditionInput,
    resetCatalog: load.resetCatalog,
  };
}
