// Permission blocks: the only holders of scope plus actions (SPEC.md "Access model records"), created with
// every scope mode's validation, listed per tenant, deleted only when nothing links them.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation, ObjectKind } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { conflict, invalidInput, notFound, type AppError } from '../errors.js';
import { findGroup } from '../groups/index.js';
import * as v from '../validate.js';
import { actionsByRef } from './action-queries.js';
import * as q from './block-queries.js';
import { parseBlockInput, scopeMode, targetOf, type BlockInput } from './block-spec.js';
import { ANY_READ, createModelGate, POLICY_READ } from './gate.js';

export interface BlockDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the conditions a block stores. */
  documents: v.JsonBounds;
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };

const policyRef = (tenantId: string | null) => ({ kind: 'policy' as const, id: null, tenantId });

export function createBlockService(deps: BlockDeps) {
  const { sql, authz, audit } = deps;
  const gate = createModelGate({ sql, authz });

  async function load(id: unknown, field = 'id'): Promise<q.BlockRow> {
    const row = await q.findBlock(sql, v.uuid(field, id));
    if (!row) throw notFound('permission block');
    return row;
  }

  /** A block by id for an operation of `p`; none answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown): Promise<q.BlockRow> {
    const row = await q.findBlock(sql, v.uuid('id', id));
    if (!row) throw await gate.missing(p, 'policy', 'permission block', { actions: POLICY_READ });
    return row;
  }

  /**
   * A block's object or group, named in its input: one the caller may not read answers exactly as a
   * missing one (in the tenant the input names), so a refused caller cannot probe another tenant's ids.
   */
  function unreadable(p: Principal, spec: BlockInput, object: { kind: ObjectKind; id: string }, notLive: string): Promise<AppError> {
    return gate.missing(p, object.kind, invalidInput(notLive), { tenantId: spec.tenantId, actions: ANY_READ });
  }

  /** Exact-object scopes: the object must exist; its kind, type and tenant complete the block. */
  async function objectTarget(p: Principal, spec: BlockInput) {
    const id = spec.objectId as string;
    const found = spec.objectKind === 'api_endpoint'
      ? await q.resolveEndpoint(sql, id)
      : [...await q.resolveObject(sql, spec.objectKind, id), ...(spec.objectKind === null ? await q.resolveEndpoint(sql, id) : [])];
    const object = found[0];
    const notLive = `objectId does not resolve to a live ${spec.objectKind ?? 'object'}`;
    const kind = (object?.kind ?? spec.objectKind ?? 'entity') as ObjectKind;
    if (!object || !(await gate.canRead(p, { kind, id }, ANY_READ))) throw await unreadable(p, spec, { kind, id }, notLive);
    if (found.length > 1) throw invalidInput('objectId matches objects of several kinds; set objectKind');
    if (spec.objectType !== null && spec.objectType !== object.type) {
      throw invalidInput(`objectType does not match the object, which is ${object.type ?? `a ${object.kind} (no sub-kind)`}`);
    }
    if (spec.tenantId !== undefined && spec.tenantId !== null && spec.tenantId !== object.tenant_id) {
      throw invalidInput("tenantId must be the object's tenant (or null for a platform-wide block)");
    }
    // Omitted: the object's own tenant, so a tenant administrator's block stays inside the tenant.
    return { tenantId: spec.tenantId === undefined ? object.tenant_id : spec.tenantId, kind: object.kind, type: object.type };
  }

  /** Object-group scopes stay tenant-bound: the group's tenant is the block's. */
  async function groupTarget(p: Principal, spec: BlockInput): Promise<string> {
    const group = await findGroup(sql, spec.groupId as string);
    const ref = { kind: 'group' as const, id: spec.groupId as string };
    if (!group || group.deleted_at || !(await gate.canRead(p, ref, ANY_READ))) throw await unreadable(p, spec, ref, 'groupId does not resolve to a live group');
    if (spec.scopeMode !== 'group' && group.group_type !== 'object') throw invalidInput(`scopeMode ${spec.scopeMode} needs an object group`);
    if (group.tenant_id === null) throw invalidInput('group scopes must belong to a tenant; this group is platform-wide');
    if (spec.tenantId && spec.tenantId !== group.tenant_id) throw invalidInput("tenantId must be the group's tenant: group scopes stay tenant-bound");
    return group.tenant_id;
  }

  /** Ids or names; every one must exist (`unknown action: <x>`). */
  async function resolveActions(refs: string[]): Promise<{ id: string; name: string }[]> {
    const ids = refs.filter(v.isUuid).map((r) => r.toLowerCase());
    const found = await actionsByRef(sql, ids, refs.filter((r) => !v.isUuid(r)));
    const unknown = refs.find((r) => !found.some((a) => a.id === r.toLowerCase() || a.name === r));
    if (unknown !== undefined) throw invalidInput(`unknown action: ${unknown}`);
    return found;
  }

  return {
    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.BlockRow> {
      const spec = parseBlockInput(input);
      let tenantId = spec.tenantId ?? null;
      let kind = spec.objectKind;
      let type = spec.objectType;
      if (spec.scopeMode === 'object') {
        const target = await objectTarget(p, spec);
        tenantId = target.tenantId;
        kind = target.kind;
        type = type ?? target.type;
      } else if (spec.scopeMode.startsWith('group')) {
        tenantId = await groupTarget(p, spec);
      }
      await gate.writeAny(p, ['policy.manage'], policyRef(tenantId), tenantId);
      const actions = await resolveActions(spec.actionRefs);
      const target = targetOf(spec.scopeMode, kind, type);
      if (target) {
        const catalog = await authz.catalog();
        for (const a of actions) {
          if (!catalog.applies(a.name, target.kind, target.type)) throw invalidInput(`action '${a.name}' is not valid for ${target.type ?? target.kind}`);
        }
      }
      const conditions = authz.validateConditions(spec.conditions);
      v.boundedJson('conditions', conditions, deps.documents);
      const id = await q.insertBlock(sql, {
        tenantId, scopeMode: spec.scopeMode, objectKind: spec.scopeMode === 'object' ? kind : spec.objectKind,
        objectType: spec.objectType, objectId: spec.objectId, groupId: spec.groupId, effect: spec.effect, conditions,
        actionIds: actions.map((a) => a.id), createdBy: p.entityId,
      });
      audit.record({
        event: 'permission_block.create', outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind: 'policy', targetId: id, requestId,
        details: { scope_mode: spec.scopeMode, effect: spec.effect, actions: actions.map((a) => a.name) },
      });
      // Unlinked, it grants nothing yet; a policy-object fact about this id may still be cached as absent.
      await deps.invalidate({ kind: 'blocks', blockIds: [id] });
      return load(id);
    },

    async get(p: Principal, id: unknown): Promise<q.BlockRow> {
      const row = await lookup(p, id);
      await gate.readAny(p, POLICY_READ, { kind: 'policy', id: row.id });
      return row;
    },

    async list(p: Principal, args: Paged): Promise<ListResult<q.BlockRow>> {
      const tenantId = args.tenantId === undefined || args.tenantId === null ? undefined : v.uuid('tenantId', args.tenantId);
      const filter: q.BlockFilter = { tenantId, readableTenantIds: await gate.readableTenants(p, POLICY_READ, 'policy', tenantId) };
      if (args.scopeMode !== undefined && args.scopeMode !== null) filter.scopeMode = scopeMode(args.scopeMode);
      return q.listBlocks(sql, filter, pageOf(args, deps.lists));
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await lookup(p, id);
      await gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: row.id }, row.tenant_id);
      await sql.begin(async (tx) => {
        if (!(await q.lockBlock(tx, row.id))) throw notFound('permission block');
        const links = await q.blockLinks(tx, row.id);
        if (links.roles + links.policies > 0) {
          throw conflict(`permission block is still linked to ${links.roles} role(s) and ${links.policies} direct policy(ies); unlink it first`);
        }
        await q.deleteBlock(tx, row.id);
      });
      audit.record({ event: 'permission_block.delete', outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'policy', targetId: row.id, requestId });
      await deps.invalidate({ kind: 'blocks', blockIds: [row.id] });
      return true;
    },
  };
}

export type BlockService = ReturnType<typeof createBlockService>;
