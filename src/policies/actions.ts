// Actions and their applicability: global verbs (product-specific ones added by platform administrators)
// and the object kinds and types each is valid on. Applicability validates grants and never grants.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import { pageOf, type ListResult } from '../db/paging.js';
import { conflict, forbidden, invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import * as q from './action-queries.js';
import { objectKind, objectType } from './block-spec.js';
import { createModelGate, POLICY_READ } from './gate.js';

export interface ActionDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };
const given = (args: Record<string, unknown>, key: string) => args[key] !== undefined && args[key] !== null;

const NAME = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
/** Word parts that are identifiers, not verbs: hex runs with digits (uuids, serials) and long numbers. */
const ID_LIKE = /^(?=[0-9a-f]*[0-9])[0-9a-f]{8,}$|[0-9]{4,}/;

/** SPEC.md: global names only, never object-specific (the actions__name_format constraint, with reasons). */
export function actionName(value: unknown): string {
  const name = v.name('name', value, 64);
  if (name.includes(':')) {
    throw invalidInput("action name must not contain ':': actions are global verbs; object kinds and types belong in applicability");
  }
  if (/[0-9a-f]{8}-[0-9a-f]{4}-/i.test(name)) throw invalidInput('object-specific action names are not allowed: the name must not contain an object id');
  if (!NAME.test(name)) {
    throw invalidInput("action name must be lowercase words joined by '.' or '_' (for example firmware.update), at most 64 characters");
  }
  if (name.split(/[._]/).some((part) => ID_LIKE.test(part))) {
    throw invalidInput('object-specific action names are not allowed: the name must not contain an object id');
  }
  return name;
}

function applicabilityList(value: unknown): q.ApplicabilityJson[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidInput('applicability must be a list of {objectKind, objectType}');
  const seen = new Map<string, q.ApplicabilityJson>();
  value.forEach((item: Record<string, unknown>, i) => {
    const kind = objectKind(`applicability[${i}].objectKind`, item?.objectKind);
    const type = given(item ?? {}, 'objectType') ? objectType(`applicability[${i}].objectType`, item.objectType, kind) : null;
    seen.set(`${kind}\n${type ?? ''}`, { object_kind: kind, object_type: type });
  });
  return [...seen.values()];
}

export function createActionService(deps: ActionDeps) {
  const { sql, authz, audit } = deps;
  const gate = createModelGate({ sql, authz });
  const bounds = { defaultLimit: 50, maxLimit: deps.lists.maxLimit };

  /** "Policy read": on the tenant asked about, or anywhere the caller reads its access model. */
  async function requirePolicyRead(p: Principal, tenantId: unknown): Promise<void> {
    if (given({ tenantId }, 'tenantId')) {
      const id = v.uuid('tenantId', tenantId);
      return gate.readAny(p, POLICY_READ, { kind: 'policy', id: null, tenantId: id });
    }
    const tenants = await gate.readableTenants(p, POLICY_READ, 'policy');
    if (tenants !== null && tenants.length === 0) throw forbidden();
  }

  const requirePlatform = (p: Principal) => gate.writeAny(p, ['policy.manage'], { kind: 'policy', id: null, tenantId: null }, null);

  async function load(id: unknown, field = 'id'): Promise<q.ActionRow> {
    const row = await q.findAction(sql, v.uuid(field, id));
    if (!row) throw notFound('action');
    return row;
  }

  function record(p: Principal, event: string, targetId: string, requestId: string | null, details: Record<string, unknown>) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: null, targetKind: 'action', targetId, requestId, details });
  }

  /** The engine's catalog and every decision built on it are dropped on every instance. */
  const catalogChanged = () => deps.invalidate({ kind: 'actions' });

  return {
    async list(p: Principal, args: Paged): Promise<ListResult<q.ActionRow>> {
      await requirePolicyRead(p, args.tenantId);
      const filter: q.ActionFilter = {};
      if (given(args, 'objectKind')) filter.objectKind = objectKind('objectKind', args.objectKind);
      if (given(args, 'objectType')) filter.objectType = objectType('objectType', args.objectType, filter.objectKind ?? null);
      const page = await q.listActions(sql, filter, pageOf(args, bounds));
      return { total: page.total, items: page.items.map((i) => i.j) };
    },

    async get(p: Principal, id: unknown): Promise<q.ActionRow> {
      await requirePolicyRead(p, undefined);
      return load(id);
    },

    async create(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.ActionRow> {
      const name = actionName(input.name);
      const description = v.optionalText('description', input.description);
      const pairs = applicabilityList(input.applicability);
      await requirePlatform(p);
      const id = await sql.begin(async (tx) => {
        const id = await q.insertAction(tx, { name, description });
        await q.replaceApplicability(tx, id, pairs);
        return id;
      });
      record(p, 'action.create', id, requestId, { name, applicability: pairs });
      await catalogChanged();
      return load(id);
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>, requestId: string | null = null): Promise<q.ActionRow> {
      const row = await load(id);
      const changes: { name?: string; description?: string | null } = {};
      if (v.given(input, 'name')) changes.name = actionName(input.name);
      if ('description' in input) changes.description = v.optionalText('description', input.description);
      const pairs = v.given(input, 'applicability') ? applicabilityList(input.applicability) : undefined;
      await requirePlatform(p);
      // Seeded roles, rules and tokens name system actions: renaming one would silently change them all.
      if (row.is_system && changes.name !== undefined && changes.name !== row.name) throw invalidInput(`system action '${row.name}' cannot be renamed`);
      await sql.begin(async (tx) => {
        if (!(await q.updateAction(tx, row.id, changes))) throw notFound('action');
        if (pairs) await q.replaceApplicability(tx, row.id, pairs);
      });
      record(p, 'action.update', row.id, requestId, { fields: Object.keys(changes), applicability: pairs ?? null });
      await catalogChanged();
      return load(row.id);
    },

    async remove(p: Principal, id: unknown, requestId: string | null = null): Promise<boolean> {
      const row = await load(id);
      await requirePlatform(p);
      if (row.is_system) throw invalidInput(`system action '${row.name}' cannot be deleted`);
      const used = await q.blocksUsingAction(sql, row.id);
      if (used > 0) throw conflict(`action '${row.name}' is used by ${used} permission block(s); remove it from them first`);
      if (!(await sql.begin((tx) => q.deleteAction(tx, row.id, row.name)))) throw notFound('action');
      record(p, 'action.delete', row.id, requestId, { name: row.name });
      await catalogChanged();
      return true;
    },

    async applicability(p: Principal, args: Paged) {
      await requirePolicyRead(p, args.tenantId);
      const filter: { actionName?: string; objectKind?: string; objectType?: string } = {};
      if (given(args, 'actionName')) filter.actionName = v.name('actionName', args.actionName, 64);
      if (given(args, 'objectKind')) filter.objectKind = objectKind('objectKind', args.objectKind);
      if (given(args, 'objectType')) filter.objectType = objectType('objectType', args.objectType, filter.objectKind ?? null);
      return q.listApplicability(sql, filter, pageOf(args, bounds));
    },

    async addApplicability(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<q.ApplicabilityEntryRow> {
      const action = await load(input.actionId, 'actionId');
      const [pair] = applicabilityList([input]) as [q.ApplicabilityJson];
      await requirePlatform(p);
      const id = await q.insertApplicability(sql, action.id, pair.object_kind, pair.object_type);
      record(p, 'action_applicability.add', action.id, requestId, { name: action.name, ...pair });
      await catalogChanged();
      return (await q.findApplicability(sql, id)) as q.ApplicabilityEntryRow;
    },

    async removeApplicability(p: Principal, input: Record<string, unknown>, requestId: string | null = null): Promise<boolean> {
      const action = await load(input.actionId, 'actionId');
      const [pair] = applicabilityList([input]) as [q.ApplicabilityJson];
      await requirePlatform(p);
      if (!(await q.deleteApplicability(sql, action.id, pair.object_kind, pair.object_type))) return false;
      record(p, 'action_applicability.remove', action.id, requestId, { name: action.name, ...pair });
      await catalogChanged();
      return true;
    },
  };
}

export type ActionService = ReturnType<typeof createActionService>;
