// Scope containment: does a block's (or a token ceiling's) scope contain an object? Pure and allocation-free.
import type { ObjectFacts, Scope } from './model.js';

/**
 * Kinds a tenant-wide scope does not reach (issue 35 point 6): the audit log (who did what, from where)
 * and credentials (secrets, tokens, certificates). A tenant-scope `read` makes a read-only member, not an
 * auditor or a key custodian: these need a block naming the kind (object_kind/object_type), the exact
 * object, or platform scope. SPEC.md's tenant-admin role carries them as separate blocks for this reason.
 */
export const SENSITIVE_KINDS: ReadonlySet<string> = new Set(['audit_log', 'credential']);

/** A tenant block contains the tenant's objects, the tenant itself included, except the sensitive kinds. */
function inTenantScope(s: Scope, o: ObjectFacts): boolean {
  return o.tenantId !== null && o.tenantId === s.tenantId && !SENSITIVE_KINDS.has(o.kind);
}

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
    case 'tenant': return inTenantScope(s, o);
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
    case 'tenant': return inTenantScope(s, o);
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

/**
 * For explain: the scope as the upstream admin UI reads it: scope_kind is the block's mode, scope_ref the one
 * string that mode names (tenant id, object kind, object type, object id, group id; `<group id>:<object
 * type or kind>` for the group-contents modes, `<group id>:group` for child and descendant groups); null for
 * platform. A tenant bound on a kind, type or object scope is not part of it (the block id leads to it).
 */
export function describeScope(s: Scope): { scope_kind: string; scope_ref: string | null } {
  return { scope_kind: s.mode, scope_ref: scopeRef(s) };
}

function scopeRef(s: Scope): string | null {
  switch (s.mode) {
    case 'platform': return null;
    case 'tenant': return s.tenantId;
    case 'object_kind': return s.objectKind;
    case 'object_type': return s.objectType;
    case 'object': return s.objectId;
    case 'group': return s.groupId;
    case 'group_direct_objects':
    case 'group_descendant_objects': return `${s.groupId}:${s.objectType ?? s.objectKind}`;
    case 'group_child_groups':
    case 'group_descendant_groups': return `${s.groupId}:group`;
    default: return null;
  }
}
