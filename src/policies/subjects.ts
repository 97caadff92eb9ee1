// Grant subjects: an entity or a principal group, the tenant rule every grant obeys, and which cached
// decisions a grant change reaches.
import type { Principal } from '../auth/principal.js';
import type { Invalidation } from '../authz/index.js';
import type { Queryable } from '../db/client.js';
import { invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import { ANY_READ, type ModelGate } from './gate.js';
import { findSubject, memberIds, type SubjectRow } from './subject-queries.js';

export const SUBJECT_KINDS = ['entity', 'group'] as const;
export type SubjectKind = (typeof SUBJECT_KINDS)[number];

/** Above this many members, a change to a group's grants drops every cached decision instead of listing them. */
export const MEMBER_INVALIDATION_CAP = 5000;

export async function loadSubject(sql: Queryable, kindValue: unknown, idValue: unknown): Promise<SubjectRow> {
  const kind = v.oneOf('subjectKind', kindValue, SUBJECT_KINDS);
  const row = await findSubject(sql, kind, v.uuid('subjectId', idValue));
  if (!row || row.deleted) throw notFound(kind === 'entity' ? 'subject entity' : 'subject group');
  if (kind === 'group' && row.sub_kind !== 'principal') {
    throw invalidInput('subjectId must be a principal group: object groups are boundaries, never subjects');
  }
  return row;
}

/**
 * The subject of a new grant in `tenantId`, named by `p`: a missing one, and another tenant's the caller
 * may not read, answer alike (guard.missing: 'subject entity not found' to a caller reading the tenant,
 * else 'forbidden'), so a refused caller cannot tell another tenant's ids from unused ones. Call it once
 * the caller's grant in `tenantId` is checked.
 */
export async function lookupSubject(sql: Queryable, gate: Pick<ModelGate, 'missing' | 'canRead'>, p: Principal, kindValue: unknown, idValue: unknown, tenantId: string | null): Promise<SubjectRow> {
  const kind = v.oneOf('subjectKind', kindValue, SUBJECT_KINDS);
  const id = v.uuid('subjectId', idValue);
  const row = await findSubject(sql, kind, id);
  const foreign = !!row?.tenant_id && row.tenant_id !== tenantId;
  if (!row || row.deleted || (foreign && !(await gate.canRead(p, { kind, id }, ANY_READ)))) {
    throw await gate.missing(p, kind, kind === 'entity' ? 'subject entity' : 'subject group', { tenantId, actions: ANY_READ });
  }
  if (kind === 'group' && row.sub_kind !== 'principal') {
    throw invalidInput('subjectId must be a principal group: object groups are boundaries, never subjects');
  }
  return row;
}

/**
 * SPEC.md: the grant's tenant must match the subject's tenant context; cross-tenant grants only for
 * platform roles (or platform-wide blocks). Global entities (humans, platform services) have no home
 * tenant and gain access to tenants exactly this way; a platform-wide principal group is not in a tenant.
 */
export function requireSubjectInTenant(subject: SubjectRow, tenantId: string | null, platformGrant: boolean): void {
  if (platformGrant) return;
  if (subject.kind === 'entity' && (subject.tenant_id === null || subject.tenant_id === tenantId)) return;
  if (subject.kind === 'group' && subject.tenant_id === tenantId) return;
  throw invalidInput(subject.tenant_id === null
    ? 'a platform-wide principal group receives only platform grants (platform roles or platform-wide blocks)'
    : 'the subject belongs to another tenant: cross-tenant grants are only for platform roles');
}

/**
 * The cached decisions a new grant to this subject in `tenantId` may change. A grant in a tenant changes
 * that tenant's part of its holders' grants alone (SubjectGrants.parts, keyed by the grant's tenant): only
 * that part is read again (tenantGrants), however many other tenants they hold grants in. A platform grant
 * (tenantId null) drops the holders' grants. A group that held nothing left no trace in its members' cached
 * grants, so the members are named; a very large group drops everything.
 */
export async function reachOf(sql: Queryable, subject: { kind: SubjectKind; id: string }, tenantId: string | null): Promise<Invalidation> {
  const holders = subject.kind === 'entity' ? [subject.id] : await memberIds(sql, [subject.id], MEMBER_INVALIDATION_CAP);
  if (holders.length > MEMBER_INVALIDATION_CAP) return { kind: 'all' };
  if (tenantId !== null) return { kind: 'tenantGrants', entityIds: holders, tenantIds: [tenantId] };
  return { kind: 'subjects', entityIds: subject.kind === 'entity' ? holders : [subject.id, ...holders] };
}

/** The cached decisions a removed grant of this subject in `tenantId` may change (see reachOf). */
export function reachOfRemoved(subject: { kind: SubjectKind; id: string }, tenantId: string | null): Invalidation {
  // A group's grants are named in its members' cached grants (the group is on their path): they go with it.
  if (subject.kind === 'group') return { kind: 'groups', groupIds: [subject.id] };
  return tenantId !== null ? { kind: 'tenantGrants', entityIds: [subject.id], tenantIds: [tenantId] } : { kind: 'subjects', entityIds: [subject.id] };
}
