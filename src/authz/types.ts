// The authorization engine's contract with every other domain: what a decision is asked about and what
// it answers. Other domains import from authz/index.ts only.
import type { Principal } from '../auth/principal.js';

export const OBJECT_KINDS = [
  'entity', 'resource', 'group', 'tenant', 'role', 'policy', 'credential', 'api_endpoint', 'audit_log', 'signing_key',
] as const;
export type ObjectKind = (typeof OBJECT_KINDS)[number];

/**
 * What a decision is about. With an id, one object (the engine loads its tenant, type, attributes and
 * group containment). With id null, the kind as a whole at the scope of `tenantId`, or at platform
 * scope when tenantId is null too: "may create tenants" is {kind: 'tenant', id: null, tenantId: null}.
 *
 * A tenant object's own tenant is itself, so a tenant-scope block of T covers T (a tenant admin reads
 * its tenant). Tenant lifecycle (rename, freeze, delete...) needs "platform manage on tenant" (SPEC.md):
 * ask with {kind: 'tenant', id: T, tenantId: null}, which evaluates T as a platform-level object: only
 * platform blocks, platform-wide kind/type blocks and exact-object blocks on T match, never T's own
 * tenant-scope blocks. An explicit `tenantId` on a ref with an id always overrides the loaded one.
 */
export interface ObjectRef {
  kind: ObjectKind;
  id: string | null;
  tenantId?: string | null;
}

export interface AuthorizeRequest {
  subjectId: string;
  action: string;
  object: ObjectRef;
  /** Request context for ABAC conditions: ip, method, client_id, mfa_verified, time. */
  context?: Record<string, unknown>;
  /** A scoped access token's credential id: its stored ceiling narrows the subject's live grants. */
  ceilingCredentialId?: string | null;
  /**
   * Management reads of a frozen tenant: SPEC.md says freezing locks operations while the data stays
   * readable, so the management API asks with this flag for reads; grants are still evaluated in full.
   * Runtime checks (/authz/check, publish...) never set it: a frozen tenant denies them.
   */
  readingFrozenTenant?: boolean;
  /**
   * Whom the asker may ask about: a subject owned by a tenant other than this one is answered exactly as
   * an unknown subject ('subject not found'). Set by the runtime check APIs for a caller whose gate holds
   * in this tenant only; absent, every subject is visible.
   */
  subjectVisibleIn?: string;
}

export interface Decision {
  allowed: boolean;
  /** 'allowed', 'subject not found', 'tenant is frozen', "explicitly denied by role 'x' block", ... */
  reason: string;
  /** The permission blocks that decided (the matching deny, or the matching allows). */
  blockIds: string[];
  details?: Record<string, unknown>;
}

/** What changed, so caches drop exactly what may now be wrong (or everything, when unsure). */
export type Invalidation =
  | { kind: 'all' }
  | { kind: 'subjects'; entityIds: string[] }
  | { kind: 'objects'; objectIds: string[] }
  | { kind: 'tenants'; tenantIds: string[] }
  | { kind: 'credentials'; credentialIds: string[] }
  // Additions (any id-based kind drops every entry built from those ids, so a near miss still works):
  | { kind: 'groups'; groupIds: string[] }
  | { kind: 'roles'; roleIds: string[] }
  | { kind: 'blocks'; blockIds: string[] }
  /**
   * The grants these subjects hold through assignments and direct policies of these tenants changed (one
   * was added, removed or replaced; not the roles or blocks themselves): only those tenants' part of their
   * cached grants is read again, and their connected tenants. A role or block change is 'roles'/'blocks'.
   */
  | { kind: 'tenantGrants'; entityIds: string[]; tenantIds: string[] }
  /** Actions or their applicability changed: the catalog and every memoised decision are dropped. */
  | { kind: 'actions' };

export interface DecideOptions {
  context?: Record<string, unknown>;
  /** See AuthorizeRequest.readingFrozenTenant. */
  readingFrozenTenant?: boolean;
}

export interface Authz {
  authorize(request: AuthorizeRequest): Promise<Decision>;
  /** A decision for a caller: subject = the principal's entity, ceiling = its scoped token's, if any. */
  decide(principal: Principal, action: string, object: ObjectRef, options?: DecideOptions): Promise<Decision>;
  /** Like decide, but throws FORBIDDEN with the exact message 'forbidden' when denied. */
  require(principal: Principal, action: string, object: ObjectRef, options?: DecideOptions): Promise<void>;
  /**
   * The live tenants the caller's entity is connected to (home tenant, role assignments direct or through
   * principal groups, active memberships): the candidates of its listings, not a grant. Cached like its
   * grants and dropped by the same invalidations (and by any of those tenants').
   */
  connectedTenants(principal: Principal): Promise<readonly string[]>;
  /** manage at platform scope, without a ceiling (scoped tokens are never platform administrators). */
  isPlatformAdmin(principal: Principal): Promise<boolean>;
  /**
   * Call after the write committed and before answering: drops the local entries at once (a load that
   * raced the write is not cached), then NOTIFYs the other instances, which drop the same entries.
   */
  invalidate(change: Invalidation): Promise<void>;
}
