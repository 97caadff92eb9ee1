// Turns rows into the engine's in-memory shapes: indexed grants, object and tenant facts, ceilings, catalog.
import { createHash } from 'node:crypto';
import { compileConditions } from './conditions.js';
import {
  EMPTY_SET, type ActionIndex, type Ceiling, type CompiledBlock, type CompiledPolicy, type ObjectFacts, type ScopeMode, type SubjectFacts,
  type SubjectGrants, type TenantFacts,
} from './model.js';
import type { ActionRow, BindingRow, BlockRow, CeilingRow, GrantRow, ObjectRow, SubjectRow, TenantRow } from './queries.js';

export function compileSubject(row: SubjectRow, expiresAt: number): SubjectFacts {
  return {
    stale: false, expiresAt,
    id: row.id, name: row.name, kind: row.kind, tenantId: row.tenant_id, status: row.status,
    view: { id: row.id, kind: row.kind, tenant_id: row.tenant_id, status: row.status, attributes: row.attributes ?? {} },
  };
}

function denyReasonOf(source: BindingRow): string {
  return source.grant_kind === 'role' ? `explicitly denied by role '${source.role_name}' block` : 'explicitly denied by direct policy';
}

function emptyIndex(): ActionIndex {
  return { exact: new Map(), scan: [] };
}

function addToIndex(index: ActionIndex, block: CompiledBlock): void {
  if (block.mode === 'object' && block.objectId) {
    const list = index.exact.get(block.objectId);
    if (list) list.push(block);
    else index.exact.set(block.objectId, [block]);
  } else {
    index.scan.push(block);
  }
}

/**
 * Grants of the same shape (ignoring the assignment ids themselves) share one compiled policy. Their
 * tenant is part of the shape: a policy's refs name it, so a tenant's invalidation reaches its holders.
 */
export function policySignature(grants: readonly GrantRow[]): string {
  const parts: string[] = [];
  for (const g of grants) {
    const prefix = `${g.grant_kind}|${g.grant_tenant_id ?? ''}|${g.role_id ?? ''}|${g.via}|`;
    for (const blockId of g.block_ids) parts.push(prefix + blockId);
  }
  return createHash('sha1').update(parts.sort().join('\n')).digest('base64');
}

/** Every block id the grants bring, once. */
export function blockIdsOf(grants: readonly GrantRow[]): string[] {
  const ids = new Set<string>();
  for (const g of grants) for (const id of g.block_ids) ids.add(id);
  return [...ids];
}

/** The (grant, block) pairs, in grant order; a block that was not found (deleted since) is left out. */
export function bindingsOf(grants: readonly GrantRow[], blocks: readonly BlockRow[]): BindingRow[] {
  const byId = new Map(blocks.map((b) => [b.id, b]));
  const rows: BindingRow[] = [];
  for (const { block_ids: blockIds, ...grant } of grants) {
    for (const blockId of blockIds) {
      const block = byId.get(blockId);
      if (block === undefined) continue;
      const { id: _id, ...content } = block;
      rows.push({ ...grant, ...content, block_id: blockId });
    }
  }
  return rows;
}

/**
 * One block per id however many grants reach it (sources keep every path for explain). Denies go first
 * in every index so the common "a deny matches" case stops early.
 */
export function compilePolicy(rows: BindingRow[], signature: string, expiresAt: number): CompiledPolicy {
  const blocks = new Map<string, CompiledBlock>();
  const refs = new Set<string>();
  for (const r of rows) {
    for (const id of [r.role_id, r.via_group_id, r.grant_tenant_id, r.role_tenant_id, r.block_id, r.tenant_id, r.group_id]) {
      if (id) refs.add(id);
    }
    const source = { grantKind: r.grant_kind, grantId: r.grant_id, roleId: r.role_id, roleName: r.role_name, via: r.via };
    const existing = blocks.get(r.block_id);
    if (existing) {
      existing.sources.push(source);
      continue;
    }
    const conditions = compileConditions(r.conditions);
    blocks.set(r.block_id, {
      id: r.block_id,
      mode: r.scope_mode as ScopeMode,
      tenantId: r.tenant_id,
      objectKind: r.object_kind,
      objectType: r.object_type,
      objectId: r.object_id,
      groupId: r.group_id,
      effect: r.effect,
      actions: new Set(r.actions),
      allActions: r.all_actions,
      conditions,
      rawConditions: r.conditions ?? {},
      sources: [source],
      denyReason: denyReasonOf(r),
    });
  }
  const ordered = [...blocks.values()].sort((a, b) => (a.effect === b.effect ? 0 : a.effect === 'deny' ? -1 : 1));
  // Each action's index holds the blocks naming it plus those covering every action, denies first.
  const byAction = new Map<string, ActionIndex>();
  const allActionsIndex = emptyIndex();
  const named = new Set<string>();
  for (const b of ordered) {
    if (b.allActions) addToIndex(allActionsIndex, b);
    else for (const action of b.actions) named.add(action);
  }
  for (const action of named) {
    const index = emptyIndex();
    for (const b of ordered) if (b.allActions || b.actions.has(action)) addToIndex(index, b);
    byAction.set(action, index);
  }
  let unbound = false;
  const boundTenants = new Set<string>();
  for (const b of ordered) {
    if (b.tenantId === null || UNBOUND_MODES.has(b.mode)) unbound = true;
    else boundTenants.add(b.tenantId);
  }
  return { stale: false, expiresAt, signature, blocks: ordered, byAction, allActionsIndex, refs, unbound, boundTenants };
}

/**
 * Scopes whose containment (scope.ts) does not check the object's tenant against the block's: a block
 * in one of them, or with no tenant, may contain an object of any tenant. Every other scope with a tenant
 * contains only that tenant's objects.
 */
const UNBOUND_MODES: ReadonlySet<ScopeMode> = new Set(['platform', 'group', 'group_child_groups', 'group_descendant_groups']);

/** The key of a grant's part: its tenant, '' for a platform grant. */
function partKeyOf(grant: GrantRow): string {
  return grant.grant_tenant_id ?? '';
}

/** Grant rows by part key, in their order. */
export function grantsByPart(grants: readonly GrantRow[]): Map<string, GrantRow[]> {
  const byKey = new Map<string, GrantRow[]>();
  for (const g of grants) {
    const key = partKeyOf(g);
    const list = byKey.get(key);
    if (list) list.push(g);
    else byKey.set(key, [g]);
  }
  return byKey;
}

/** The policy ref a subject holding a part carries: a part that goes stale takes its holders along. */
export const POLICY_REF = 'policy:';

/** The ids a subject's own grant rows add to its refs (their tenants are on the parts: see policySignature). */
export function grantRefsOf(grants: readonly GrantRow[], out: Set<string>): Set<string> {
  for (const g of grants) {
    out.add(g.grant_id);
    if (g.via_group_id) out.add(g.via_group_id);
  }
  return out;
}

export function compileGrants(subject: SubjectFacts, grants: readonly GrantRow[], parts: Map<string, CompiledPolicy>, expiresAt: number): SubjectGrants {
  // The parts' own ids (roles, blocks, groups) stay on the shared parts: invalidating one of them marks the
  // part stale and takes every subject holding it along (cache.ts). Only what is the subject's own is
  // listed here, so an entry stays small however many blocks it reaches.
  const refs = grantRefsOf(grants, new Set<string>([subject.id]));
  if (subject.tenantId) refs.add(subject.tenantId);
  const g: SubjectGrants = {
    stale: false, expiresAt, subject, parts: new Map(), everywhere: [], byTenant: new Map(), version: 0, reload: new Map(), refs,
  };
  for (const [key, part] of parts) setPart(g, key, part);
  return g;
}

/** Puts a part in (replacing the key's previous one) and indexes it: costs what the two parts hold. */
export function setPart(g: SubjectGrants, key: string, part: CompiledPolicy | undefined): void {
  const previous = g.parts.get(key);
  if (previous) {
    g.parts.delete(key);
    if (previous.unbound) removeOne(g.everywhere, previous);
    else {
      for (const t of previous.boundTenants) {
        const list = g.byTenant.get(t);
        if (list && removeOne(list, previous) && list.length === 0) g.byTenant.delete(t);
      }
    }
  }
  if (!part) return;
  g.parts.set(key, part);
  g.refs.add(POLICY_REF + part.signature);
  g.expiresAt = Math.min(g.expiresAt, part.expiresAt);
  if (part.unbound) g.everywhere.push(part);
  else {
    for (const t of part.boundTenants) {
      const list = g.byTenant.get(t);
      if (list) list.push(part);
      else g.byTenant.set(t, [part]);
    }
  }
}

function removeOne<T>(list: T[], value: T): boolean {
  const i = list.indexOf(value);
  if (i < 0) return false;
  list.splice(i, 1);
  return true;
}

export function compileObject(row: ObjectRow, expiresAt: number): ObjectFacts {
  const attributes = row.attributes ?? undefined;
  const objectView: Record<string, unknown> = { id: row.id, kind: row.kind, type: row.type, tenant_id: row.tenant_id };
  const resourceView: Record<string, unknown> = { id: row.id, kind: row.sub_kind ?? row.kind, tenant_id: row.tenant_id };
  if (attributes) {
    objectView.attributes = attributes;
    resourceView.attributes = attributes;
  }
  const refs = new Set<string>([row.id, ...row.all_groups, ...row.ancestors]);
  if (row.tenant_id) refs.add(row.tenant_id);
  if (row.parent_id) refs.add(row.parent_id);
  return {
    stale: false, expiresAt,
    kind: row.kind, id: row.id, type: row.type, tenantId: row.tenant_id, name: row.name,
    directGroups: row.direct_groups.length ? new Set(row.direct_groups) : EMPTY_SET,
    allGroups: row.all_groups.length ? new Set(row.all_groups) : EMPTY_SET,
    parentId: row.parent_id,
    ancestors: row.ancestors.length ? new Set(row.ancestors) : EMPTY_SET,
    objectView, resourceView, refs,
  };
}

/** A kind as a whole at a tenant's or the platform's scope: no id, no type, no attributes. */
export function kindFacts(kind: string, tenantId: string | null): ObjectFacts {
  const view = { kind, tenant_id: tenantId };
  return {
    stale: false, expiresAt: Number.POSITIVE_INFINITY,
    kind, id: null, type: null, tenantId, name: null,
    directGroups: EMPTY_SET, allGroups: EMPTY_SET, parentId: null, ancestors: EMPTY_SET,
    objectView: view, resourceView: view, refs: new Set(tenantId ? [tenantId] : []),
  };
}

export function compileTenant(row: TenantRow, expiresAt: number): TenantFacts {
  return { stale: false, expiresAt, id: row.id, status: row.status, view: { id: row.id, status: row.status, attributes: row.attributes ?? {} } };
}

export function compileCeiling(credentialId: string, row: CeilingRow | undefined, expiresAt: number): Ceiling {
  const usable = !!row && row.kind === 'access_token' && row.status === 'active' && row.scoped;
  return {
    stale: false, expiresAt,
    credentialId,
    entityId: row?.entity_id ?? null,
    usable,
    credentialExpiresAt: row?.expires_at ? new Date(row.expires_at).getTime() : null,
    rules: (usable && row ? row.limits : []).map((l) => ({
      mode: l.scope_mode as ScopeMode,
      tenantId: l.tenant_id,
      objectKind: l.object_kind,
      objectType: l.object_type,
      objectId: l.object_id,
      groupId: null,
      actions: new Set(l.actions),
      conditions: compileConditions(l.conditions),
    })),
    refs: new Set([credentialId, ...(row ? [row.entity_id] : [])]),
  };
}

/** Which actions exist and which (kind, type) pairs each is valid on. */
export interface ActionCatalog {
  has(action: string): boolean;
  /** type null: valid on the kind as a whole or on any of its types. */
  applies(action: string, kind: string, type: string | null): boolean;
  /** Every (kind, type) the action applies to (guardrails expand platform and tenant scopes with it). */
  pairs(action: string): { kind: string; type: string | null }[];
  names(): string[];
  idOf(action: string): string | null;
}

export function compileCatalog(rows: ActionRow[]): ActionCatalog {
  const ids = new Map(rows.map((r) => [r.name, r.id]));
  const byAction = new Map<string, { kinds: Map<string, Set<string | null>>; pairs: { kind: string; type: string | null }[] }>();
  for (const row of rows) {
    const kinds = new Map<string, Set<string | null>>();
    for (const p of row.applicability) {
      let types = kinds.get(p.kind);
      if (!types) kinds.set(p.kind, (types = new Set()));
      types.add(p.type);
    }
    byAction.set(row.name, { kinds, pairs: row.applicability.map((p) => ({ kind: p.kind, type: p.type })) });
  }
  return {
    has: (action) => byAction.has(action),
    applies(action, kind, type) {
      const types = byAction.get(action)?.kinds.get(kind);
      if (!types) return false;
      // A kind-level row covers every type; a question about the whole kind is valid when any row exists.
      return type === null || types.has(null) || types.has(type);
    },
    pairs: (action) => byAction.get(action)?.pairs ?? [],
    names: () => [...byAction.keys()],
    idOf: (action) => ids.get(action) ?? null,
  };
}
