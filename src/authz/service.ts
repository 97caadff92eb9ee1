// The authorization service other domains use: decisions with caching and cross-instance invalidation,
// explain, guardrail checks for the management API, audit of tenant-state denials.
import { randomUUID } from 'node:crypto';
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Queryable, Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import { forbidden } from '../errors.js';
import type { Logger } from '../log.js';
import { createAuthzCache, type AuthzCache, type CacheStats } from './cache.js';
import { createCheckAudit, type CheckAudit } from './check-audit.js';
import { compileCatalog, type ActionCatalog } from './compile.js';
import { validateConditions } from './conditions.js';
import { createEngine, type Engine } from './engine.js';
import { explainDecision, type Explanation } from './explain.js';
import { checkGrant, checkMembership, type GrantCheck, type GuardrailDeps, type GuardrailResult } from './guardrails.js';
import { selectActionCatalog } from './queries.js';
import type { Authz, AuthorizeRequest, DecideOptions, Decision, Invalidation, ObjectRef } from './types.js';

export const INVALIDATE_TOPIC = 'authz.invalidate';

export interface AuthzSettings {
  cacheSubjects: number;
  cacheObjects: number;
  cacheDecisions: number;
  cacheMaxBytes: number;
  cacheTtlSecs: number;
  auditAllowed: 'summary' | 'all';
  auditSummarySecs: number;
}

export interface AuthzService extends Authz {
  /** A decision for the runtime APIs: no audit here (the API writes authz.check itself). */
  check(request: AuthorizeRequest): Promise<Decision>;
  explain(request: AuthorizeRequest): Promise<Explanation>;
  /** The tenant an object lives in (null: platform object), or found=false. Uses the same cached facts. */
  objectTenant(object: ObjectRef): Promise<{ found: boolean; tenantId: string | null }>;
  /** Guardrails for role assignments, direct policies and block changes; throws action_not_allowed_for_entity_kind. */
  checkGrant(sql: Queryable, check: GrantCheck): Promise<GuardrailResult>;
  /** Guardrails for adding an entity to a principal group. */
  checkMembership(sql: Queryable, input: { groupId: string; entityId: string; actor: Principal | null; requestId?: string | null }): Promise<GuardrailResult>;
  /** Audits grants that passed through require_override; call after the transaction committed. */
  recordOverrides(result: GuardrailResult, meta: { actor: Principal | null; tenantId: string | null; operation: string; targetKind?: string; targetId?: string | null; requestId?: string | null }): void;
  validateConditions: typeof validateConditions;
  catalog(): Promise<ActionCatalog>;
  readonly checkAudit: CheckAudit;
  readonly engine: Engine;
  stats(): CacheStats;
  close(): Promise<void>;
}

function idsOf(change: Invalidation): string[] | null {
  switch (change.kind) {
    case 'subjects': return change.entityIds;
    case 'objects': return change.objectIds;
    case 'tenants': return change.tenantIds;
    case 'credentials': return change.credentialIds;
    case 'groups': return change.groupIds;
    case 'roles': return change.roleIds;
    case 'blocks': return change.blockIds;
    default: return null;
  }
}

export interface AuthzDeps {
  /** The shared pool: what guardrail checks outside a transaction read through. */
  sql: Sql;
  /**
   * The engine's own connections (createGenericPlanPool): every fact is read by key, and a subject's
   * bindings statement costs more to plan than to run, so it is planned once per connection.
   */
  lookups: Sql;
  hub: NotifyHub;
  audit: AuditWriter;
  log: Logger;
  config: AuthzSettings;
}

export function createAuthz(deps: AuthzDeps): AuthzService {
  const { sql, lookups, hub, audit, log, config } = deps;
  const instance = randomUUID();
  const cache: AuthzCache = createAuthzCache({
    subjects: config.cacheSubjects, objects: config.cacheObjects, decisions: config.cacheDecisions,
    maxBytes: config.cacheMaxBytes, ttlMs: config.cacheTtlSecs * 1000,
  });
  const engine = createEngine({ sql: lookups, cache, cacheUsable: () => hub.connected });
  const checkAudit = createCheckAudit(audit, config);

  function apply(change: Invalidation): void {
    if (change.kind === 'tenantGrants') return cache.reloadGrants(change.entityIds, change.tenantIds);
    const ids = idsOf(change);
    if (ids === null) {
      cache.clear();
      engine.resetCatalog();
    } else {
      cache.dropIds(ids);
    }
  }

  const unsubscribe = hub.subscribe(INVALIDATE_TOPIC, (payload) => {
    const p = payload as { origin?: string; change?: Invalidation; all?: boolean } | null;
    // The hub degrades oversized payloads to {all: true}.
    if (!p || p.all || !p.change) return apply({ kind: 'all' });
    if (p.origin === instance) return;
    apply(p.change);
  });
  // Notifications may have been missed while the LISTEN connection was down: nothing cached can be trusted.
  const unReconnect = hub.onReconnect(() => {
    log.info('authz cache cleared after LISTEN reconnect');
    apply({ kind: 'all' });
  });

  function auditTenantDenial(r: AuthorizeRequest, d: Decision): Decision {
    if (!d.allowed && d.details !== undefined && d.details.tenant_status !== undefined) {
      audit.record({
        event: 'authz.tenant_state_denied', outcome: 'deny', actorEntityId: r.subjectId, tenantId: d.details.tenant_id as string,
        targetKind: r.object.kind, targetId: r.object.id,
        details: { action: r.action, object_kind: r.object.kind, object_id: r.object.id, reason: d.reason, tenant_id: d.details.tenant_id, tenant_status: d.details.tenant_status },
      });
    }
    return d;
  }

  function authorize(r: AuthorizeRequest): Promise<Decision> {
    // A memoised decision skips the promise chain (other domains call this on every publish).
    const memo = engine.peek(r);
    if (memo) return Promise.resolve(auditTenantDenial(r, memo));
    return engine.authorize(r).then((d) => auditTenantDenial(r, d));
  }

  function ceilingOf(principal: Principal): string | null {
    // A scoped principal without a credential id still gets a ceiling: one that permits nothing.
    return principal.scoped ? (principal.credentialId ?? 'missing-credential') : null;
  }

  async function decide(principal: Principal, action: string, object: ObjectRef, options?: DecideOptions): Promise<Decision> {
    return authorize({
      subjectId: principal.entityId, action, object, context: options?.context, ceilingCredentialId: ceilingOf(principal),
      readingFrozenTenant: options?.readingFrozenTenant === true,
    });
  }

  const guardrailDeps: GuardrailDeps = {
    catalog: async (q) => (q === sql ? engine.catalog() : compileCatalog(await selectActionCatalog(q))),
    isPlatformAdmin: (p) => service.isPlatformAdmin(p),
    recordRejection(check, entityKind, pair, verdict) {
      audit.record({
        event: 'guardrail.rejected', outcome: 'deny', actorEntityId: check.actor?.entityId ?? null, tenantId: check.tenantId,
        requestId: check.requestId ?? null,
        details: { operation: check.operation, entity_kind: entityKind, action: pair.action, object_kind: pair.objectKind, object_type: pair.objectType, rule: verdict.step, rule_id: verdict.rule?.id ?? null },
      });
    },
  };

  const service: AuthzService = {
    authorize,
    decide,
    async require(principal, action, object, options) {
      const d = await decide(principal, action, object, options);
      if (!d.allowed) throw forbidden();
    },
    async isPlatformAdmin(principal) {
      if (principal.scoped) return false;
      const d = await authorize({ subjectId: principal.entityId, action: 'manage', object: { kind: 'tenant', id: null, tenantId: null } });
      return d.allowed;
    },
    connectedTenants: (principal) => engine.connectedTenants(principal.entityId),
    async invalidate(change) {
      apply(change);
      try {
        await hub.notify(INVALIDATE_TOPIC, { origin: instance, change });
      } catch (err) {
        // The write already committed; other instances fall back to the TTL. Say so loudly.
        log.error('authz invalidation NOTIFY failed; other instances rely on the cache TTL', { err, change: change.kind });
      }
    },
    check: (r) => engine.authorize(r),
    explain: (r) => explainDecision(engine, r),
    async objectTenant(object) {
      if (object.id === null) return { found: true, tenantId: object.tenantId ?? null };
      const facts = await engine.objectFacts(object.kind, object.id);
      return facts ? { found: true, tenantId: facts.tenantId } : { found: false, tenantId: null };
    },
    checkGrant: (q, check) => checkGrant(q, guardrailDeps, check),
    checkMembership: (q, input) => checkMembership(q, guardrailDeps, input),
    recordOverrides(result, meta) {
      for (const o of result.overrides) {
        audit.record({
          event: 'guardrail.override', outcome: 'allow', actorEntityId: meta.actor?.entityId ?? null, tenantId: meta.tenantId,
          targetKind: meta.targetKind ?? null, targetId: meta.targetId ?? null, requestId: meta.requestId ?? null,
          details: { operation: meta.operation, entity_kind: o.entityKind, action: o.action, object_kind: o.objectKind, object_type: o.objectType, rule_id: o.ruleId },
        });
      }
    },
    validateConditions,
    catalog: () => engine.catalog(),
    checkAudit,
    engine,
    stats: () => cache.stats(),
    async close() {
      unsubscribe();
      unReconnect();
      checkAudit.close();
    },
  };
  return service;
}
