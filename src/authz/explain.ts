// Explain: the same decision as authorize, annotated binding by binding: which blocks matched, which deny
// won, which scope or condition made a block skip. Bindings carry INTERFACES.md's "Explain JSON" shape, as
// the upstream admin UI reads it: grant_id is the role's id (role grants) or the action's id (capability
// grants, i.e. direct policies), scope_ref the string its scope_kind names.
import { conditionsHold, firstFailure, type ConditionInput } from './conditions.js';
import type { Engine } from './engine.js';
import { describeScope, scopeContains } from './scope.js';
import type { AuthorizeRequest } from './types.js';

export interface Binding {
  /** `<role assignment or direct policy id>:<block id>`, plus `:<action id>` for a capability grant's other actions. */
  id: string;
  block_id: string;
  effect: 'allow' | 'deny';
  grant_kind: 'role' | 'capability';
  /** The role's id, or the granted action's id. */
  grant_id: string | null;
  role_name: string | null;
  role_path: string | null;
  scope_kind: string;
  scope_ref: string | null;
  conditions: Record<string, unknown>;
  via: string;
  result: 'matched' | 'skipped';
  skip_reason: string | null;
  /** Set on a matched allow when a matching deny decided instead. */
  overridden_by?: string;
}

export interface Explanation {
  allowed: boolean;
  reason: string;
  subject: { id: string; name: string; kind: string; status: string } | null;
  resource: { id: string | null; kind: string; type: string | null; name: string | null; tenant_id: string | null } | null;
  capability: { id: string | null; name: string };
  matched_binding: Binding | null;
  evaluated_bindings: Binding[];
  ceiling?: { credential_id: string; allowed: boolean };
  details?: Record<string, unknown>;
}

export async function explainDecision(engine: Engine, r: AuthorizeRequest): Promise<Explanation> {
  const g = await engine.gather(r);
  const catalog = await engine.catalog();
  const capability = { id: catalog.idOf(r.action), name: r.action };
  const subject = g.grants ? { id: g.grants.subject.id, name: g.grants.subject.name, kind: g.grants.subject.kind, status: g.grants.subject.status } : null;
  const resource = g.facts ? { id: g.facts.id, kind: g.facts.kind, type: g.facts.type, name: g.facts.name, tenant_id: g.facts.tenantId } : null;
  if (g.done) {
    const out: Explanation = { allowed: g.decision.allowed, reason: g.decision.reason, subject, resource, capability, matched_binding: null, evaluated_bindings: [] };
    if (g.decision.details) out.details = g.decision.details;
    return out;
  }
  const { decision } = engine.evaluate(r, g);
  const input: ConditionInput = engine.conditionInput(g, r.context);
  const bindings: Binding[] = [];
  const policy = await engine.policyForExplain(g.grants.subject.id);
  const actionId = (name: string) => catalog.idOf(name);
  for (const block of policy.blocks) {
    const grants = block.allActions || block.actions.has(r.action);
    let skip: string | null = null;
    if (!grants) skip = `block does not grant '${r.action}'`;
    else if (!scopeContains(block, g.facts)) skip = `${block.mode} scope does not contain the object`;
    else if (block.conditions && !conditionsHold(block.conditions, input)) skip = firstFailure(block.conditions, input);
    const scope = describeScope(block);
    for (const source of block.sources) {
      const rolePath = source.roleName === null ? null : source.via === 'direct' ? `role:${source.roleName}` : `${source.via}/role:${source.roleName}`;
      const binding = (id: string, grantId: string | null): Binding => ({
        id,
        block_id: block.id,
        effect: block.effect,
        grant_kind: source.grantKind,
        grant_id: grantId,
        role_name: source.roleName,
        role_path: rolePath,
        ...scope,
        conditions: block.rawConditions,
        via: source.via,
        result: skip === null ? 'matched' : 'skipped',
        skip_reason: skip,
      });
      const id = `${source.grantId}:${block.id}`;
      if (source.grantKind === 'role') bindings.push(binding(id, source.roleId));
      else if (grants) bindings.push(binding(id, actionId(r.action)));
      // A capability grant of other actions: one binding per action it grants, so each names its action.
      else for (const name of [...block.actions].sort()) bindings.push(binding(`${id}:${actionId(name) ?? name}`, actionId(name)));
    }
  }
  const winner = decision.blockIds[0];
  const matched = bindings.find((b) => b.block_id === winner && b.result === 'matched') ?? null;
  if (!decision.allowed && matched && matched.effect === 'deny') {
    for (const b of bindings) if (b.result === 'matched' && b.effect === 'allow') b.overridden_by = matched.block_id;
  }
  const out: Explanation = { allowed: decision.allowed, reason: decision.reason, subject, resource, capability, matched_binding: matched, evaluated_bindings: bindings };
  if (g.ceiling) out.ceiling = { credential_id: g.ceiling.credentialId, allowed: decision.reason !== 'denied by access token permission ceiling' };
  if (decision.details) out.details = decision.details;
  return out;
}
