// Shape rules of a permission block per scope mode (INTERFACES.md 1.1), checked before anything is looked up.
import { OBJECT_KINDS, SCOPE_MODES, type ScopeMode } from '../authz/index.js';
import { invalidInput } from '../errors.js';
import * as v from '../validate.js';

export const MAX_BLOCK_ACTIONS = 100;
const OBJECT_TYPE = /^[a-z_]+:[a-z0-9][a-z0-9_.-]*$/;
const GROUP_OBJECT_KINDS = ['entity', 'resource'];

export interface BlockInput {
  scopeMode: ScopeMode;
  /** undefined: not given (object and group scopes then take their target's tenant); null: platform-wide. */
  tenantId: string | null | undefined;
  objectKind: string | null;
  objectType: string | null;
  objectId: string | null;
  groupId: string | null;
  effect: 'allow' | 'deny';
  conditions: unknown;
  /** Action ids, or names (accepted too: clients often know the name only). */
  actionRefs: string[];
}

const present = (v: unknown) => v !== undefined && v !== null;

export function scopeMode(value: unknown): ScopeMode {
  if (typeof value !== 'string' || !(SCOPE_MODES as readonly string[]).includes(value)) {
    throw invalidInput(`unsupported permission block scopeMode '${String(value)}'`);
  }
  return value as ScopeMode;
}

export function objectKind(field: string, value: unknown): string {
  return v.oneOf(field, value, OBJECT_KINDS);
}

/** `<objectKind>:<sub-kind>`: bare values such as device or channel are never types. */
export function objectType(field: string, value: unknown, kind: string | null): string {
  if (typeof value !== 'string' || !OBJECT_TYPE.test(value) || (kind !== null && value.split(':')[0] !== kind)) {
    throw invalidInput(`${field} must be <objectKind>:<sub-kind>, e.g. entity:device or resource:channel`);
  }
  return value;
}

/** Which fields each mode takes; anything else given is an error naming the mode. */
const SHAPES: Record<ScopeMode, { needs: string[]; allows: string[] }> = {
  platform: { needs: [], allows: [] },
  tenant: { needs: ['tenantId'], allows: [] },
  object_kind: { needs: ['objectKind'], allows: ['tenantId'] },
  object_type: { needs: ['objectKind', 'objectType'], allows: ['tenantId'] },
  object: { needs: ['objectId'], allows: ['tenantId', 'objectKind', 'objectType'] },
  group: { needs: ['groupId'], allows: ['tenantId'] },
  group_direct_objects: { needs: ['groupId', 'objectKind'], allows: ['tenantId', 'objectType'] },
  group_descendant_objects: { needs: ['groupId', 'objectKind'], allows: ['tenantId', 'objectType'] },
  group_child_groups: { needs: ['groupId'], allows: ['tenantId'] },
  group_descendant_groups: { needs: ['groupId'], allows: ['tenantId'] },
};
const FIELDS = ['tenantId', 'objectKind', 'objectType', 'objectId', 'groupId'];

export function parseBlockInput(input: Record<string, unknown>): BlockInput {
  const mode = scopeMode(input.scopeMode);
  const shape = SHAPES[mode];
  for (const field of shape.needs) {
    if (!present(input[field])) throw invalidInput(`scopeMode ${mode} requires ${field}`);
  }
  for (const field of FIELDS) {
    if (present(input[field]) && !shape.needs.includes(field) && !shape.allows.includes(field)) {
      throw invalidInput(`scopeMode ${mode} does not take ${field}`);
    }
  }
  const kind = present(input.objectKind) ? objectKind('objectKind', input.objectKind) : null;
  if (mode.startsWith('group_') && mode.endsWith('_objects') && !GROUP_OBJECT_KINDS.includes(kind as string)) {
    throw invalidInput(`scopeMode ${mode} takes objectKind entity or resource`);
  }
  const refs = input.actionIds;
  if (!Array.isArray(refs) || refs.length === 0) throw invalidInput('actionIds must name at least one action');
  if (refs.length > MAX_BLOCK_ACTIONS) throw invalidInput(`actionIds must have at most ${MAX_BLOCK_ACTIONS} items`);
  if (refs.some((r) => typeof r !== 'string' || r.trim() === '')) throw invalidInput('actionIds must be action ids or names');
  return {
    scopeMode: mode,
    tenantId: input.tenantId === undefined ? undefined : v.optionalUuid('tenantId', input.tenantId),
    objectKind: kind,
    objectType: present(input.objectType) ? objectType('objectType', input.objectType, kind) : null,
    objectId: v.optionalUuid('objectId', input.objectId),
    groupId: v.optionalUuid('groupId', input.groupId),
    effect: present(input.effect) ? v.oneOf('effect', input.effect, ['allow', 'deny'] as const) : 'allow',
    conditions: input.conditions,
    actionRefs: [...new Set((refs as string[]).map((r) => r.trim()))],
  };
}

/** The (kind, type) an action must apply to for the block to make sense; null: any (platform, tenant). */
export function targetOf(mode: ScopeMode, kind: string | null, type: string | null): { kind: string; type: string | null } | null {
  switch (mode) {
    case 'platform':
    case 'tenant':
      return null;
    case 'group':
    case 'group_child_groups':
    case 'group_descendant_groups':
      return { kind: 'group', type: null };
    default:
      return { kind: kind as string, type };
  }
}
