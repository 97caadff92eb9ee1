// Rows of the access model as GraphQL objects (INTERFACES.md 1.10): shared by the roles domain, which embeds blocks.
import { iso } from '../graphql/mapping.js';
import type { ActionRow, ApplicabilityEntryRow } from './action-queries.js';
import type { BlockRow } from './block-queries.js';
import type { DirectPolicyRow } from './direct-policy-queries.js';
import type { RuleRow } from './rule-queries.js';

export function toAction(row: ActionRow) {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    isSystem: row.is_system,
    applicability: row.applicability.map((a) => ({ objectKind: a.object_kind, objectType: a.object_type })),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export function toBlock(row: BlockRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    scopeMode: row.scope_mode,
    objectKind: row.object_kind,
    objectType: row.object_type,
    objectId: row.object_id,
    groupId: row.group_id,
    effect: row.effect,
    conditions: row.conditions ?? {},
    allActions: row.all_actions,
    actions: row.actions.map(toAction),
    createdAt: iso(row.created_at),
    // Blocks are immutable: "last changed" is their creation (the upstream field is non-null).
    updatedAt: iso(row.updated_at ?? row.created_at),
  };
}

export function toApplicabilityEntry(row: ApplicabilityEntryRow) {
  return {
    id: row.id,
    actionId: row.action_id,
    actionName: row.action_name,
    description: row.description,
    objectKind: row.object_kind,
    objectType: row.object_type,
    createdAt: iso(row.created_at),
  };
}

export function toRule(row: RuleRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    entityKind: row.entity_kind,
    actionName: row.action_name,
    objectKind: row.object_kind,
    objectType: row.object_type,
    decision: row.decision,
    isAbsolute: row.is_absolute,
    createdAt: iso(row.created_at),
  };
}

export function toDirectPolicy(row: DirectPolicyRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    subjectKind: row.subject_kind,
    subjectId: row.subject_id,
    permissionBlockId: row.block_id,
    permissionBlock: toBlock(row.block),
    createdAt: iso(row.created_at),
  };
}

export const listOf = <R, T>(page: { total: number; items: R[] }, map: (r: R) => T) => ({ total: page.total, items: page.items.map(map) });
