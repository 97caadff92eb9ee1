// Guardrail rules: platform administrators manage the global ones; tenant administrators may only add
// stricter (deny) rules to their tenant; no tenant rule may contradict a global absolute rule.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import { GUARDRAIL_CODE, type AuthzService } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { AppError, forbidden, invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import { objectKind, objectType } from './block-spec.js';
import { createModelGate, POLICY_READ } from './gate.js';
import * as q from './rule-queries.js';

export interface RuleDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  lists: { defaultLimit: number; maxLimit: number };
}

export const ENTITY_KINDS = ['human', 'device', 'service', 'workload', 'application'] as const;
export const RULE_DECISIONS = ['allow', 'deny', 'require_override'] as const;

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

function parseRule(input: Record<string, unknown>): q.NewRule {
  const kind = objectKind('objectKind', input.objectKind);
  return {
    tenantId: v.optionalUuid('tenantId', input.tenantId),
    entityKind: v.oneOf('entityKind', input.entityKind, ENTITY_KINDS),
    actionName: v.name('actionName', input.actionName, 64),
    objectKind: kind,
    objectType: given(input, 'objectType') ? objectType('objectType', input.objectType, kind) : null,
    decision: v.oneOf('decision', input.decision, RULE_DECISIONS),
    isAbsolute: input.isAbsolute === undefined || input.isAbsolute === null ? false : input.isAbsolute === true,
  };
}

/**
 * Guardrail rules judge grant changes when they happen (the check reads them afresh each time); they never
 * take part in a decision, so no decision cache depends on them and their changes invalidate nothing.
 */
export function createRuleService(deps: RuleDeps) {
  const { sql, authz, audit } = deps;
  const gate = createModelGate({ sql, authz });
  const bounds = { defaultLimit: 50, maxLimit: deps.lists.maxLimit };

  function refuse(p: Principal, r: q.NewRule, err: AppError, requestId: string | null): never {
    audit.record({
      event: 'guardrail.rule_rejected', outcome: 'deny', actorEntityId: p.entityId, tenantId: r.tenantId, targetKind: 'policy', requestId,
      details: { entity_kind: r.entityKind, action: r.actionName, object_kind: r.objectKind, object_type: r.objectType, decision: r.decision, reason: err.message },
    });
    throw err;
  }

  return {
    async list(p: Principal, args: Paged): Promise<ListResult<q.RuleRow>> {
      const tenantId = given(args, 'tenantId') ? v.uuid('tenantId', args.tenantId) : undefined;
      const readable = await gate.readableTenants(p, POLICY_READ, 'policy', tenantId);
      if (readable !== null && readable.length === 0) throw forbidden();
      const filter: q.RuleFilter = { tenantId, readableTenantIds: readable };
      if (given(args, 'entityKind')) filter.entityKind = v.oneOf('entityKind', args.entityKind, ENTITY_KINDS);
      if (given(args, 'actionName')) filter.actionName = v.name('actionName', args.actionName, 64);
      if (given(args, 'objectKind')) filter.objectKind = objectKind('objectKind', args.objectKind);
      if (given(args, 'objectType')) filter.objectType = objectType('objectType', args.objectType, filter.objectKind ?? null);
      if (given(args, 'decision')) filter.decision = v.oneOf('decision', args.decision, RULE_DECISIONS);
      return q.listRules(sql, filter, pageOf(args, bounds));
    },

    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.RuleRow> {
      const rule = parseRule(input);
      if (rule.tenantId === null) {
        await gate.requirePlatformAdmin(p);
      } else {
        await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId: rule.tenantId }, rule.tenantId);
        if (rule.isAbsolute) throw invalidInput('isAbsolute is only for global rules (tenantId null)');
      }
      const catalog = await authz.catalog();
      if (!catalog.has(rule.actionName)) throw invalidInput(`unknown action: ${rule.actionName}`);
      if (!catalog.applies(rule.actionName, rule.objectKind, rule.objectType)) {
        throw invalidInput(`action '${rule.actionName}' is not valid for ${rule.objectType ?? rule.objectKind}`);
      }
      if (rule.tenantId !== null && rule.decision !== 'deny') {
        // A tenant allow or require_override comes before the global non-absolute rules in the precedence,
        // so it loosens them: that is a platform decision. Nothing loosens a global absolute rule.
        const binding = await q.absoluteConflicts(sql, rule, rule.decision === 'allow' ? ['deny', 'require_override'] : ['deny']);
        const absolute = binding[0];
        if (absolute) {
          refuse(p, rule, new AppError('INVALID_INPUT',
            `guardrail rule rejected: a global absolute ${absolute.decision} forbids ${rule.entityKind} receiving ${rule.actionName} on `
            + `${absolute.object_type ?? absolute.object_kind}; tenant rules cannot override it`,
            { code: GUARDRAIL_CODE, details: { rule_id: absolute.id, entity_kind: rule.entityKind, action: rule.actionName, object_kind: rule.objectKind, object_type: rule.objectType } }), requestId);
        }
        if (!(await gate.isPlatformAdmin(p))) {
          refuse(p, rule, forbidden('forbidden; tenant administrators may only add stricter tenant rules (decision deny)'), requestId);
        }
      }
      const id = await q.insertRule(sql, rule);
      audit.record({
        event: 'guardrail_rule.create', outcome: 'allow', actorEntityId: p.entityId, tenantId: rule.tenantId, targetKind: 'policy', targetId: id, requestId,
        details: { entity_kind: rule.entityKind, action: rule.actionName, object_kind: rule.objectKind, object_type: rule.objectType, decision: rule.decision, is_absolute: rule.isAbsolute },
      });
      return (await q.findRule(sql, id)) as q.RuleRow;
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await q.findRule(sql, v.uuid('id', id));
      if (!row) throw await gate.missing(p, 'policy', 'guardrail rule', { actions: POLICY_READ });
      if (row.tenant_id === null) await gate.requirePlatformAdmin(p);
      else await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId: row.tenant_id }, row.tenant_id);
      if (!(await q.deleteRule(sql, row.id))) throw notFound('guardrail rule');
      audit.record({
        event: 'guardrail_rule.delete', outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'policy', targetId: row.id, requestId,
        details: { entity_kind: row.entity_kind, action: row.action_name, object_kind: row.object_kind, object_type: row.object_type, decision: row.decision },
      });
      return true;
    },
  };
}

export type RuleService = ReturnType<typeof createRuleService>;
