// The engine's internal shapes: compiled grants of a subject, facts about objects and tenants, ceilings.
import type { CompiledConditions } from './conditions.js';

export const SCOPE_MODES = [
  'platform', 'tenant', 'object_kind', 'object_type', 'object',
  'group', 'group_direct_objects', 'group_descendant_objects', 'group_child_groups', 'group_descendant_groups',
] as const;
export type ScopeMode = (typeof SCOPE_MODES)[number];

/** Where a block applies: the same vocabulary for permission blocks and token ceilings. */
export interface Scope {
  mode: ScopeMode;
  tenantId: string | null;
  objectKind: string | null;
  objectType: string | null;
  objectId: string | null;
  groupId: string | null;
}

/** How a block reached the subject: one per (assignment or direct policy, block). */
export interface BlockSource {
  grantKind: 'role' | 'capability';
  grantId: string;
  roleId: string | null;
  roleName: string | null;
  /** 'direct' or 'group:<principal group name>' */
  via: string;
}

export interface CompiledBlock extends Scope {
  id: string;
  effect: 'allow' | 'deny';
  actions: ReadonlySet<string>;
  allActions: boolean;
  conditions: CompiledConditions | null;
  rawConditions: Record<string, unknown>;
  sources: BlockSource[];
  /** Precomputed so a deny costs no string building on the hot path. */
  denyReason: string;
}

/** Blocks relevant to one action: exact-object blocks by object id (no scan), the rest scanned. */
export interface ActionIndex {
  exact: Map<string, CompiledBlock[]>;
  scan: CompiledBlock[];
}

/** Cached facts carry a stale flag: invalidation sets it, so memoised decisions built on them die too. */
export interface Cached {
  stale: boolean;
  expiresAt: number;
}

export interface SubjectFacts extends Cached {
  id: string;
  name: string;
  kind: string;
  tenantId: string | null;
  status: string;
  /** What conditions see as entity.* */
  view: Record<string, unknown>;
}

/**
 * The blocks a set of grants expands to, indexed by action: a subject's grants of one tenant (see
 * SubjectGrants.parts). Shared by every subject whose grants there have the same shape (same roles and
 * direct policies, reached the same way): a thousand devices holding one role share one compiled policy
 * instead of a thousand copies of its blocks.
 */
export interface CompiledPolicy extends Cached {
  signature: string;
  blocks: CompiledBlock[];
  byAction: Map<string, ActionIndex>;
  /** Blocks covering every action; used for actions no specific block names. */
  allActionsIndex: ActionIndex;
  /** Ids it was built from (roles, blocks, groups, tenants): invalidation matches on these. */
  refs: Set<string>;
  /**
   * True when some block can contain an object of any tenant (platform scope, or a group scope, whose
   * containment names no tenant); otherwise every block contains only objects of one of boundTenants.
   */
  unbound: boolean;
  boundTenants: ReadonlySet<string>;
}

/**
 * A subject's grants, in parts: one compiled policy per tenant its assignments and direct policies live in
 * ('' for platform ones). A decision consults only the parts that can contain its object (those bound to
 * the object's tenant, and the unbound ones), and a grant change in one tenant reloads that tenant's part
 * alone: an operator holding the tenant-admin role of every tenant it created pays for one tenant, not all.
 */
export interface SubjectGrants extends Cached {
  subject: SubjectFacts;
  /** Compiled parts by grant tenant. Changed in place by a part reload, which bumps version. */
  parts: Map<string, CompiledPolicy>;
  /** The parts to consult for every object. */
  everywhere: CompiledPolicy[];
  /** The parts to consult for an object of a tenant (besides everywhere), by the object's tenant. */
  byTenant: Map<string, CompiledPolicy[]>;
  /** Bumped by every change of the parts: a memoised decision keeps the version it was computed at. */
  version: number;
  /** Grant tenants whose part must be read afresh before the next use, with the stamp of the change. */
  reload: Map<string, number>;
  /**
   * Every id this entry was built from (entity, groups, grants, their tenants, and 'policy:<signature>' of
   * each part): invalidation matches on these. A part reload only adds to it.
   */
  refs: Set<string>;
}

export interface ObjectFacts extends Cached {
  kind: string;
  /** null: the kind as a whole (at tenantId's scope, or platform scope). */
  id: string | null;
  type: string | null;
  tenantId: string | null;
  name: string | null;
  /** Object groups containing it directly, and those plus all their ancestors. */
  directGroups: ReadonlySet<string>;
  allGroups: ReadonlySet<string>;
  /** For groups: the parent and every ancestor. */
  parentId: string | null;
  ancestors: ReadonlySet<string>;
  /** What conditions see as object.* and resource.* */
  objectView: Record<string, unknown>;
  resourceView: Record<string, unknown>;
  refs: Set<string>;
}

export interface TenantFacts extends Cached {
  id: string;
  status: string;
  view: Record<string, unknown>;
}

/**
 * The tenants a subject is connected to (its home tenant, the tenants of its role assignments, direct or
 * through principal groups, and those it is an active member of): the candidates of its listings.
 */
export interface SubjectTenants extends Cached {
  /** Live tenants, in creation order. */
  tenantIds: readonly string[];
  /** The subject and every connected tenant, deleted ones included (a restore must drop it too). */
  refs: Set<string>;
}

export interface CeilingRule extends Scope {
  actions: ReadonlySet<string>;
  conditions: CompiledConditions | null;
}

export interface Ceiling extends Cached {
  credentialId: string;
  entityId: string | null;
  /** False when the credential is missing, revoked, not a scoped token, or expired at load time. */
  usable: boolean;
  credentialExpiresAt: number | null;
  rules: CeilingRule[];
  refs: Set<string>;
}

export const EMPTY_SET: ReadonlySet<string> = new Set();
