// Scope containment: does a block's (or a token ceiling's) scope contain an object? Pure and allocation-free.
import type { ObjectFacts, Scope } from './model.js';

/** A tenant boundary on a block: null means platform-wide, otherwise the object must live in that tenant. */
function inTenant(s: Scope, o: ObjectFacts): boolean {
  return s.tenantId === null || s.tenantId === o.tenantId;
}

/**
 * Kind-level references ({kind, id: null}) ask about "the kind as a whole": at platform scope only platform
 * blocks and platform-wide kind/type blocks contain them; at a tenant's scope, those plus that tenant's
 * tenant, kind and type blocks. Object and group scopes never contain a whole kind.
 */
function containsKind(s: Scope, o: ObjectFacts): boolean {
  switch (s.mode) {
    case 'platform': return true;
    case 'tenant': return o.tenantId !== null && s.tenantId === o.tenantId;
    case 'object_kind':
    case 'object_type': return s.objectKind === o.kind && (s.tenantId === null || s.tenantId === o.tenantId);
    default: return false;
  }
}

export function scopeContains(s: Scope, o: ObjectFacts): boolean {
  if (o.id === null) return containsKind(s, o);
  switch (s.mode) {
    case 'platform': return true;
    // A tenant object's tenantId is its own id, so a tenant block contains the tenant itself.
    case 'tenant': return o.tenantId !== null && o.tenantId === s.tenantId;
    case 'object_kind': return s.objectKind === o.kind && inTenant(s, o);
    case 'object_type': return s.objectType === o.type && s.objectKind === o.kind && inTenant(s, o);
    case 'object': return s.objectId === o.id && (s.objectKind === null || s.objectKind === o.kind) && inTenant(s, o);
    case 'group': return o.kind === 'group' && o.id === s.groupId;
    // Object-group scopes stay inside their tenant: membership of a foreign object does not carry a grant over.
    case 'group_direct_objects':
      return o.kind === s.objectKind && (s.objectType === null || s.objectType === o.type)
        && o.tenantId === s.tenantId && o.directGroups.has(s.groupId as string);
    case 'group_descendant_objects':
      return o.kind === s.objectKind && (s.objectType === null || s.objectType === o.type)
        && o.tenantId === s.tenantId && o.allGroups.has(s.groupId as string);
    case 'group_child_groups': return o.kind === 'group' && o.parentId !== null && o.parentId === s.groupId;
    case 'group_descendant_groups': return o.kind === 'group' && o.ancestors.has(s.groupId as string);
    default: return false;
  }
}

/** For explain: a short description of what a scope covers. */
export function describeScope(s: Scope): { scope_kind: string; scope_ref: Record<string, unknown> } {
  const ref: Record<string, unknown> = {};
  if (s.tenantId) ref.tenant_id = s.tenantId;
  if (s.objectKind) ref.object_kind = s.objectKind;
  if (s.objectType) ref.object_type = s.objectType;
  if (s.objectId) ref.object_id = s.objectId;
  if (s.groupId) ref.group_id = s.groupId;
  return { scope_kind: s.mode, scope_ref: ref };
}
