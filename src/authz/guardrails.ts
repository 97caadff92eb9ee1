// Guardrails: may a grant reach these entity kinds? The rule precedence (pure), the expansion of blocks
// into (action, object kind, object type) pairs, and checkGrant, which the management API calls.
import { AppError } from '../errors.js';
import type { Queryable } from '../db/client.js';
import type { Principal } from '../auth/principal.js';
import type { ActionCatalog } from './compile.js';
import { SENSITIVE_KINDS } from './scope.js';
import {
  selectBlocks, selectEntityKind, selectGroupBlockIds, selectGroupMemberKinds, selectObjectType, selectRules,
  type BlockSpecRow, type RuleRow,
} from './guardrails-queries.js';

export const GUARDRAIL_CODE = 'action_not_allowed_for_entity_kind';

export interface GrantPair {
  action: string;
  objectKind: string;
  objectType: string | null;
}

export type GuardrailDecision = 'allow' | 'deny' | 'require_override';

export interface Verdict {
  decision: GuardrailDecision;
  rule: RuleRow | null;
  /** Which precedence row decided (for tests and audit). */
  step: 'global absolute deny' | 'global absolute require_override' | 'tenant deny' | 'tenant require_override'
    | 'tenant allow' | 'global deny' | 'global require_override' | 'global allow' | 'default deny';
}

/**
 * A rule for a sub-type covers grants on that type; a restrictive rule on a sub-type also bites a grant on
 * the whole kind (which includes that type), while an allow for a sub-type never permits the whole kind.
 */
function ruleCovers(rule: RuleRow, entityKind: string, pair: GrantPair): boolean {
  if (rule.entity_kind !== entityKind || rule.action_name !== pair.action || rule.object_kind !== pair.objectKind) return false;
  if (rule.object_type === null || rule.object_type === pair.objectType) return true;
  return pair.objectType === null && rule.decision !== 'allow';
}

/** SPEC.md "Authentication" 12, in order; the first row with a covering rule decides. */
export function evaluateGuardrail(rules: readonly RuleRow[], entityKind: string, pair: GrantPair, tenantId: string | null): Verdict {
  const covering = rules.filter((r) => ruleCovers(r, entityKind, pair));
  const find = (scope: 'global' | 'tenant', decision: GuardrailDecision, absolute: boolean | null) => covering.find((r) =>
    (scope === 'global' ? r.tenant_id === null : tenantId !== null && r.tenant_id === tenantId)
    && r.decision === decision && (absolute === null || r.is_absolute === absolute));
  const steps: [Verdict['step'], RuleRow | undefined][] = [
    ['global absolute deny', find('global', 'deny', true)],
    ['global absolute require_override', find('global', 'require_override', true)],
    ['tenant deny', find('tenant', 'deny', null)],
    ['tenant require_override', find('tenant', 'require_override', null)],
    ['tenant allow', find('tenant', 'allow', null)],
    ['global deny', find('global', 'deny', false)],
    ['global require_override', find('global', 'require_override', false)],
    ['global allow', find('global', 'allow', null)],
  ];
  for (const [step, rule] of steps) {
    if (rule) return { decision: rule.decision, rule, step };
  }
  return { decision: 'deny', rule: null, step: 'default deny' };
}

/**
 * Kinds a tenant-scoped block can reach: signing keys are platform objects and never live in a tenant;
 * the sensitive kinds (audit_log, credential) are not reached by a tenant scope at decision time (scope.ts).
 */
const TENANT_BOUND_KINDS: ReadonlySet<string> = new Set(
  ['entity', 'resource', 'group', 'tenant', 'role', 'policy', 'credential', 'api_endpoint', 'audit_log'].filter((k) => !SENSITIVE_KINDS.has(k)),
);

export interface BlockSpec {
  scopeMode: string;
  tenantId?: string | null;
  objectKind?: string | null;
  objectType?: string | null;
  objectId?: string | null;
  groupId?: string | null;
  effect?: 'allow' | 'deny';
  actions: string[];
  allActions?: boolean;
}

/** What an allow block would grant, as (action, kind, type) pairs; exactTypes resolves object-scoped blocks. */
export function pairsOfBlock(block: BlockSpec, catalog: ActionCatalog, exactType: string | null = null): GrantPair[] {
  if (block.effect === 'deny') return [];
  const actions = block.allActions ? catalog.names() : block.actions;
  const out: GrantPair[] = [];
  const seen = new Set<string>();
  const push = (action: string, objectKind: string, objectType: string | null) => {
    const key = `${action}\n${objectKind}\n${objectType ?? ''}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push({ action, objectKind, objectType });
    }
  };
  for (const action of actions) {
    const pairs = catalog.pairs(action);
    switch (block.scopeMode) {
      case 'platform':
        for (const p of pairs) push(action, p.kind, p.type);
        break;
      case 'tenant':
        for (const p of pairs) if (TENANT_BOUND_KINDS.has(p.kind)) push(action, p.kind, p.type);
        break;
      case 'group':
      case 'group_child_groups':
      case 'group_descendant_groups':
        push(action, 'group', null);
        break;
      default: {
        const kind = block.objectKind ?? null;
        if (!kind) break;
        const type = block.objectType ?? (block.scopeMode === 'object' ? exactType : null);
        if (type) {
          push(action, kind, type);
          break;
        }
        // A kind-wide grant reaches every type the action applies to within the kind.
        for (const p of pairs) if (p.kind === kind) push(action, kind, p.type);
      }
    }
  }
  return out;
}

export type GrantSubject = { kind: 'entity'; id: string } | { kind: 'group'; id: string } | { kind: 'entity_kinds'; kinds: string[] };

export interface GrantCheck {
  /** The grant's tenant (the assignment's or policy's tenant_id): its own rules take part. */
  tenantId: string | null;
  subject: GrantSubject;
  /** New block specs, or ids of existing blocks. */
  blocks: (BlockSpec | string)[];
  /** Who asks: require_override passes only for a platform administrator. null = the service itself. */
  actor: Principal | null;
  /** For the audit trail: 'role_assignment.create', 'direct_policy.create', 'permission_block.update', ... */
  operation: string;
  requestId?: string | null;
}

export interface Override {
  entityKind: string;
  action: string;
  objectKind: string;
  objectType: string | null;
  ruleId: string | null;
}

export interface GuardrailResult {
  /** Pairs that passed only because a platform administrator asked: the caller audits them after commit. */
  overrides: Override[];
  pairsChecked: number;
  entityKinds: string[];
}

export interface GuardrailDeps {
  catalog(sql: Queryable): Promise<ActionCatalog>;
  isPlatformAdmin(principal: Principal): Promise<boolean>;
  /** Rejections are audited here (they never commit anything else to audit). */
  recordRejection(check: GrantCheck, entityKind: string, pair: GrantPair, verdict: Verdict): void;
}

const targetOf = (p: GrantPair) => p.objectType ?? p.objectKind;

function why(verdict: Verdict): string {
  if (verdict.step === 'default deny') return 'default deny: no rule allows it';
  const rule = verdict.rule ? ` rule ${verdict.rule.id}` : '';
  return verdict.decision === 'require_override' ? `${verdict.step}${rule}: needs a platform administrator` : `${verdict.step}${rule}`;
}

/** How one block's action reached several (kind, type) targets, and how each was judged. */
interface Expansion {
  scopeMode: string;
  objectKind: string | null;
  judged: { pair: GrantPair; verdict: Verdict; passed: boolean }[];
}

/**
 * A platform or tenant scope (or a kind-wide one over several types) grants the action on every target it
 * applies to, not only the one the operator had in mind: the message names what the scope reached, which
 * targets the guardrails refused and why, and where the action would be allowed.
 */
function explainExpansion(entityKind: string, action: string, e: Expansion): { text: string; details: Record<string, unknown> } {
  const scope = e.scopeMode === 'platform' || e.scopeMode === 'tenant' ? `the block's ${e.scopeMode} scope` : `the block's ${e.scopeMode} scope on ${String(e.objectKind)}`;
  const reached = e.judged.map((j) => targetOf(j.pair)).sort();
  const refused = new Map<string, string[]>();
  for (const j of e.judged) if (!j.passed) refused.set(why(j.verdict), [...(refused.get(why(j.verdict)) ?? []), targetOf(j.pair)]);
  const allowed = e.judged.filter((j) => j.passed).map((j) => targetOf(j.pair)).sort();
  let text = `: ${scope} reaches ${action} on ${reached.join(', ')}; refused for ${entityKind} on `
    + [...refused].map(([reason, targets]) => `${targets.sort().join(', ')} (${reason})`).join('; ');
  if (allowed.length) text += `; a ${entityKind} may receive ${action} on ${allowed.join(', ')}: narrow the block's scope to ${allowed.length === 1 ? 'it' : 'one of them'}`;
  return {
    text,
    details: { scope_mode: e.scopeMode, reached, refused: Object.fromEntries([...refused].map(([reason, targets]) => [reason, targets.sort()])), allowed },
  };
}

function rejection(entityKind: string, pair: GrantPair, verdict: Verdict, expansion: Expansion | null): AppError {
  const target = targetOf(pair);
  const head = verdict.decision === 'require_override'
    ? `guardrail requires override for ${entityKind} receiving ${pair.action} on ${target}`
    : `guardrail rejected ${entityKind} receiving ${pair.action} on ${target}`;
  const explained = expansion ? explainExpansion(entityKind, pair.action, expansion) : null;
  return new AppError('INVALID_INPUT', head + (explained?.text ?? ''), {
    code: GUARDRAIL_CODE,
    details: {
      entity_kind: entityKind, action: pair.action, object_kind: pair.objectKind, object_type: pair.objectType, rule: verdict.step,
      ...(explained ? { expansion: explained.details } : {}),
    },
  });
}

async function kindsOf(sql: Queryable, subject: GrantSubject): Promise<string[]> {
  if (subject.kind === 'entity_kinds') return [...new Set(subject.kinds)];
  if (subject.kind === 'entity') {
    const kind = await selectEntityKind(sql, subject.id);
    if (!kind) throw new AppError('INVALID_INPUT', 'subject entity not found', { code: 'invalid_reference' });
    return [kind];
  }
  const group = await selectGroupMemberKinds(sql, subject.id);
  if (!group.exists) throw new AppError('INVALID_INPUT', 'subject group not found or not a principal group', { code: 'invalid_reference' });
  return group.kinds;
}

function toSpec(row: BlockSpecRow): BlockSpec {
  return {
    scopeMode: row.scope_mode, tenantId: row.tenant_id, objectKind: row.object_kind, objectType: row.object_type,
    objectId: row.object_id, groupId: row.group_id, effect: row.effect, actions: row.actions, allActions: row.all_actions,
  };
}

/** Throws action_not_allowed_for_entity_kind on the first pair a rule rejects; returns the overrides used. */
export async function checkGrant(sql: Queryable, deps: GuardrailDeps, check: GrantCheck): Promise<GuardrailResult> {
  const entityKinds = await kindsOf(sql, check.subject);
  const ids = check.blocks.filter((b): b is string => typeof b === 'string');
  const specs = check.blocks.filter((b): b is BlockSpec => typeof b !== 'string');
  if (ids.length) {
    const rows = await selectBlocks(sql, ids);
    if (rows.length !== new Set(ids).size) throw new AppError('INVALID_INPUT', 'permission block not found', { code: 'invalid_reference' });
    specs.push(...rows.map(toSpec));
  }
  const catalog = await deps.catalog(sql);
  const blocks: { spec: BlockSpec; pairs: GrantPair[] }[] = [];
  for (const spec of specs) {
    const exactType = spec.scopeMode === 'object' && !spec.objectType && spec.objectKind && spec.objectId
      ? await selectObjectType(sql, spec.objectKind, spec.objectId) : null;
    blocks.push({ spec, pairs: pairsOfBlock(spec, catalog, exactType) });
  }
  const pairs = blocks.flatMap((b) => b.pairs);
  const result: GuardrailResult = { overrides: [], pairsChecked: 0, entityKinds };
  if (pairs.length === 0 || entityKinds.length === 0) return result;
  const rules = await selectRules(sql, check.tenantId, entityKinds, [...new Set(pairs.map((p) => p.action))]);
  let admin: boolean | undefined;
  const passes = async (verdict: Verdict) => {
    if (verdict.decision === 'allow') return true;
    if (verdict.decision !== 'require_override') return false;
    admin ??= check.actor ? await deps.isPlatformAdmin(check.actor) : false;
    return admin;
  };
  for (const entityKind of entityKinds) {
    for (const block of blocks) {
      for (const pair of block.pairs) {
        result.pairsChecked++;
        const verdict = evaluateGuardrail(rules, entityKind, pair, check.tenantId);
        if (await passes(verdict)) {
          if (verdict.decision === 'require_override') {
            result.overrides.push({ entityKind, action: pair.action, objectKind: pair.objectKind, objectType: pair.objectType, ruleId: verdict.rule?.id ?? null });
          }
          continue;
        }
        deps.recordRejection(check, entityKind, pair, verdict);
        // Rejected: when the block's scope reached this target among others, judge them all to explain.
        const siblings = block.pairs.filter((p) => p.action === pair.action);
        let expansion: Expansion | null = null;
        if (siblings.length > 1) {
          const judged = [];
          for (const p of siblings) {
            const v = evaluateGuardrail(rules, entityKind, p, check.tenantId);
            judged.push({ pair: p, verdict: v, passed: await passes(v) });
          }
          expansion = { scopeMode: block.spec.scopeMode, objectKind: block.spec.objectKind ?? null, judged };
        }
        throw rejection(entityKind, pair, verdict, expansion);
      }
    }
  }
  return result;
}

/** A principal-group membership change: the joining entity must be allowed to receive what the group holds. */
export async function checkMembership(sql: Queryable, deps: GuardrailDeps, input: { groupId: string; entityId: string; actor: Principal | null; requestId?: string | null }): Promise<GuardrailResult> {
  const kind = await selectEntityKind(sql, input.entityId);
  if (!kind) throw new AppError('INVALID_INPUT', 'entity not found', { code: 'invalid_reference' });
  const held = await selectGroupBlockIds(sql, input.groupId);
  const result: GuardrailResult = { overrides: [], pairsChecked: 0, entityKinds: [kind] };
  // Grants of different tenants are judged with their own tenant's rules.
  const byTenant = new Map<string | null, string[]>();
  for (const h of held) byTenant.set(h.tenant_id, [...(byTenant.get(h.tenant_id) ?? []), h.block_id]);
  for (const [tenantId, blocks] of byTenant) {
    const r = await checkGrant(sql, deps, {
      tenantId, subject: { kind: 'entity_kinds', kinds: [kind] }, blocks: [...new Set(blocks)], actor: input.actor,
      operation: 'principal_group_member.add', requestId: input.requestId ?? null,
    });
    result.overrides.push(...r.overrides);
    result.pairsChecked += r.pairsChecked;
  }
  return result;
}
