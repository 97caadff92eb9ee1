// Access-token ceilings: validation of AccessTokenPermissionInput (INTERFACES.md 1.3 messages) and the
// "no broader than mine" test a scoped token's own ceiling applies to tokens it mints.
import { OBJECT_KINDS } from '../authz/types.js';
import { invalidInput } from '../errors.js';
import { boundedJson, isUuid, type JsonBounds } from '../validate.js';
import type { LimitRow } from './credential-queries.js';

export interface PermissionInput {
  actions?: string[] | null;
  scopeMode?: string | null;
  tenantId?: string | null;
  objectKind?: string | null;
  objectType?: string | null;
  objectId?: string | null;
  conditions?: unknown;
}

const MODES = ['platform', 'tenant', 'object_kind', 'object_type', 'object'];
export const MAX_PERMISSIONS = 100;

/** Shape checks; unknown action names are checked against the database by the caller. */
export function normalisePermissions(list: PermissionInput[] | null | undefined, scoped: boolean, documents: JsonBounds): LimitRow[] {
  const perms = list ?? [];
  if (perms.length > MAX_PERMISSIONS) throw invalidInput(`at most ${MAX_PERMISSIONS} permissions are allowed`);
  if (scoped && perms.length === 0) throw invalidInput('a scoped access token needs at least one permission');
  if (!scoped && perms.length > 0) throw invalidInput('an unscoped access token takes an empty permissions list');
  return perms.map((p, i) => {
    const where = `permissions[${i}]`;
    const actions = [...new Set((p.actions ?? []).map((a) => a.trim()))];
    if (actions.length === 0 || actions.some((a) => a === '')) throw invalidInput(`${where}: each permission needs at least one action`);
    const mode = p.scopeMode ?? '';
    if (!MODES.includes(mode)) throw invalidInput(`${where}: unsupported scopeMode '${mode}' (one of ${MODES.join(', ')})`);
    const kind = p.objectKind ?? null;
    const type = p.objectType ?? null;
    const tenantId = p.tenantId ?? null;
    const objectId = p.objectId ?? null;
    if (kind !== null && !(OBJECT_KINDS as readonly string[]).includes(kind)) throw invalidInput(`${where}: unknown objectKind '${kind}'`);
    if (type !== null && (kind === null || !new RegExp(`^${kind}:[a-z0-9][a-z0-9_.-]*$`).test(type))) {
      throw invalidInput(`${where}: objectType must be <objectKind>:<sub-kind>, e.g. entity:device`);
    }
    for (const [name, value] of [['tenantId', tenantId], ['objectId', objectId]] as const) {
      if (value !== null && !isUuid(value)) throw invalidInput(`${where}: ${name} must be a UUID`);
    }
    if ((mode === 'platform' || mode === 'object') && tenantId !== null) throw invalidInput(`${where}: tenantId is not allowed with scopeMode ${mode}`);
    if (mode === 'platform' && (kind || type || objectId)) throw invalidInput(`${where}: scopeMode platform takes no object fields`);
    if (mode === 'tenant' && (!tenantId || kind || type || objectId)) throw invalidInput(`${where}: scopeMode tenant takes tenantId and no object fields`);
    if (mode === 'object_kind' && (!kind || type || objectId)) throw invalidInput(`${where}: scopeMode object_kind takes objectKind only`);
    if (mode === 'object_type' && (!kind || !type || objectId)) throw invalidInput(`${where}: scopeMode object_type takes objectKind and objectType`);
    if (mode === 'object' && (!objectId || type)) throw invalidInput(`${where}: scopeMode object takes objectId (and optionally objectKind)`);
    const conditions = p.conditions ?? {};
    if (typeof conditions !== 'object' || conditions === null || Array.isArray(conditions)) {
      throw invalidInput(`${where}: conditions must be a JSON object`);
    }
    boundedJson(`${where}.conditions`, conditions, documents);
    return {
      actions, scope_mode: mode, tenant_id: tenantId?.toLowerCase() ?? null, object_kind: kind, object_type: type,
      object_id: objectId?.toLowerCase() ?? null, conditions: conditions as Record<string, unknown>,
    };
  });
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj).sort().map((k) => `${JSON.stringify(k)}:${canonical(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const sameJson = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** Whether `outer` allows at least everything `inner` could (conservative: unsure means no). */
function scopeCovers(outer: LimitRow, inner: LimitRow): boolean {
  switch (outer.scope_mode) {
    case 'platform':
      return true;
    case 'tenant':
      return inner.tenant_id === outer.tenant_id && inner.scope_mode !== 'platform' && inner.scope_mode !== 'object';
    case 'object_kind':
      return (inner.scope_mode === 'object_kind' || inner.scope_mode === 'object_type') && inner.object_kind === outer.object_kind
        && (outer.tenant_id === null || inner.tenant_id === outer.tenant_id);
    case 'object_type':
      return inner.scope_mode === 'object_type' && inner.object_type === outer.object_type
        && (outer.tenant_id === null || inner.tenant_id === outer.tenant_id);
    case 'object':
      return inner.scope_mode === 'object' && inner.object_id === outer.object_id;
    default:
      return false;
  }
}

/** Every permission of `wanted` must fit inside one row of `ceiling` (actions, scope and conditions). */
export function withinCeiling(wanted: LimitRow[], ceiling: LimitRow[]): boolean {
  return wanted.every((w) => ceiling.some((c) => w.actions.every((a) => c.actions.includes(a)) && scopeCovers(c, w)
    && (Object.keys(c.conditions).length === 0 || sameJson(c.conditions, w.conditions))));
}

export function toPermissionOutput(l: LimitRow) {
  return {
    actions: l.actions, scopeMode: l.scope_mode, tenantId: l.tenant_id, objectKind: l.object_kind, objectType: l.object_type,
    objectId: l.object_id, conditions: l.conditions ?? {},
  };
}
