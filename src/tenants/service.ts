// Tenants (workspaces): creation with its seeded role, reads, listing, and the lifecycle of SPEC.md
// "States and transitions" (enable, disable, freeze, delete, restore within retention, purge).
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import { createTenantAdminRole } from '../authz/index.js';
import type { Authz, Invalidation } from '../authz/types.js';
import type { Queryable, Sql } from '../db/client.js';
import { listingSql, pageOf, type ListResult } from '../db/paging.js';
import { forbidden, invalidInput, notFound } from '../errors.js';
import { createAccessGuard } from '../access/guard.js';
import { readableTenants } from '../access/readable-scope.js';
import * as v from '../validate.js';
import * as q from './queries.js';

export const TENANT_STATUSES = ['active', 'inactive', 'frozen', 'deleted'] as const;

export interface TenantsDeps {
  sql: Sql;
  /** Generic-plan connections for plain list pages (db/paging.ts listingSql); absent: the shared pool. */
  pages?: Sql;
  authz: Authz;
  audit: AuditWriter;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the JSON documents it stores and of the JSON filters it takes. */
  documents: v.JsonBounds;
  /** How long a deleted tenant can be restored. */
  retentionSecs: number;
  /** Seeds a new tenant's default device types inside its creation transaction (profiles domain). */
  seedTenant?: (tx: Queryable, tenantId: string) => Promise<void>;
  /** The certificate authority's part in a tenant's life (wired in the composition root). */
  certificates?: TenantCertificateHooks;
}

export interface TenantCertificateHooks {
  /** After creation committed: the tenant's issuing authority is provisioned (never throws). */
  created(tenantId: string, actorEntityId: string): Promise<void>;
  /** Inside the deletion transaction: revokes the certificates of the tenant's entities; how many. */
  deleting(tx: Queryable, tenantId: string, actorEntityId: string): Promise<number>;
}

export function createTenantsService(deps: TenantsDeps) {
  const { sql, authz, audit } = deps;

  async function load(id: unknown): Promise<q.TenantRow> {
    const row = await q.findTenant(sql, v.uuid('id', id));
    if (!row) throw notFound('tenant');
    return row;
  }

  /**
   * Rename, tags, attributes and deletion need "platform manage on tenant": the tenant evaluated as a
   * platform-level object, so a tenant admin's own tenant-scope grant is not enough (SPEC.md "Tenant").
   */
  async function requirePlatformManage(p: Principal, tenantId: string): Promise<void> {
    await authz.require(p, 'manage', { kind: 'tenant', id: tenantId, tenantId: null });
  }

  const { requirePlatformAdmin, missing } = createAccessGuard({ sql, authz });

  /** A live tenant by id for an operation of `p`; none (or a deleted one) answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown): Promise<q.TenantRow> {
    const row = await q.findTenant(sql, v.uuid('id', id));
    if (!row || row.deleted_at) throw await missing(p, 'tenant', 'tenant');
    return row;
  }

  function record(p: Principal, event: string, tenantId: string, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind: 'tenant', targetId: tenantId, details });
  }

  async function changed(id: string): Promise<q.TenantRow> {
    await deps.invalidate({ kind: 'tenants', tenantIds: [id] });
    return load(id);
  }

  function tenantInput(input: Record<string, unknown>) {
    return {
      alias: v.alias('alias', input.alias),
      tags: v.stringList('tags', input.tags),
      attributes: v.jsonDocument('attributes', input.attributes, deps.documents),
    };
  }

  return {
    load,
    lookup,

    async create(p: Principal, input: Record<string, unknown>): Promise<q.TenantRow> {
      const tenant: q.NewTenant = { name: v.name('name', input.name), ...tenantInput(input), createdBy: p.entityId };
      const platform = { kind: 'tenant' as const, id: null, tenantId: null };
      const may = (await authz.decide(p, 'create', platform)).allowed || (await authz.decide(p, 'manage', platform)).allowed;
      if (!may) throw forbidden();
      const created = await sql.begin(async (tx) => {
        const tenantId = await q.insertTenant(tx, tenant);
        await deps.seedTenant?.(tx, tenantId);
        const role = await createTenantAdminRole(tx, { tenantId, creatorEntityId: p.entityId }, { audit });
        if (p.entityKind === 'human') await q.insertMembership(tx, tenantId, p.entityId);
        return { tenantId, invalidation: role.invalidation };
      });
      const id = created.tenantId;
      record(p, 'tenant.create', id, { name: tenant.name });
      // The creator's grants in the new tenant changed (the tenant-admin role): that part of its cached
      // grants is read again everywhere, and its connected tenants (the membership).
      await deps.invalidate(created.invalidation);
      await deps.certificates?.created(id, p.entityId);
      return load(id);
    },

    async get(p: Principal, id: unknown): Promise<q.TenantRow> {
      const row = await q.findTenant(sql, v.uuid('id', id));
      // A deleted tenant is hidden from everyone but platform administrators: to others it is a missing one.
      if (!row || (row.deleted_at && !(await authz.isPlatformAdmin(p)))) throw await missing(p, 'tenant', 'tenant');
      if (row.deleted_at) return row;
      const ref = { kind: 'tenant' as const, id: row.id };
      const read = await authz.decide(p, 'read', ref, { readingFrozenTenant: true });
      if (!read.allowed) await authz.require(p, 'manage', ref, { readingFrozenTenant: true });
      return row;
    },

    async list(p: Principal, args: Record<string, unknown> & { limit?: number | null; offset?: number | null }): Promise<ListResult<q.TenantRow>> {
      const deleted = args.deleted === undefined || args.deleted === null ? 'live' : v.oneOf('deleted', args.deleted, v.DELETED_FILTERS);
      const admin = await authz.isPlatformAdmin(p);
      if (deleted !== 'live' && !admin) throw forbidden();
      // Platform administrators see every tenant; everyone else only the workspaces they may read.
      const readableIds = admin ? null : (await readableTenants({ authz }, p, 'read', 'tenant')) ?? null;
      const filter: q.TenantFilter = {
        readableIds,
        deleted,
        order: args.order === undefined || args.order === null ? 'created_at' : v.oneOf('order', args.order, Object.keys(q.TENANT_ORDER) as (keyof typeof q.TENANT_ORDER)[]),
        dir: args.dir === undefined || args.dir === null ? 'asc' : v.oneOf('dir', args.dir, v.SORT_DIRS),
      };
      if (typeof args.q === 'string' && args.q.trim()) filter.q = args.q.trim();
      if (typeof args.name === 'string' && args.name) filter.name = args.name;
      if (typeof args.alias === 'string' && args.alias) filter.alias = args.alias;
      if (args.status) filter.status = v.oneOf('status', args.status, TENANT_STATUSES);
      return q.listTenants(listingSql(sql, deps.pages, q.plainTenantListing(filter)), filter, pageOf(args, deps.lists));
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.TenantRow> {
      const row = await lookup(p, id);
      const changes: q.TenantChanges = {};
      if (v.given(input, 'name')) changes.name = v.name('name', input.name);
      if ('alias' in input) changes.alias = v.alias('alias', input.alias);
      if (v.given(input, 'tags')) changes.tags = v.stringList('tags', input.tags);
      if (v.given(input, 'attributes')) changes.attributes = v.jsonDocument('attributes', input.attributes, deps.documents);
      await requirePlatformManage(p, row.id);
      await q.updateTenant(sql, row.id, changes);
      record(p, 'tenant.update', row.id, { fields: Object.keys(changes) });
      // tenant.attributes.* and tenant.status feed ABAC conditions.
      return changed(row.id);
    },

    async setStatus(p: Principal, id: unknown, status: 'active' | 'inactive' | 'frozen'): Promise<q.TenantRow> {
      await requirePlatformAdmin(p);
      const row = await load(id);
      if (row.deleted_at) throw invalidInput('tenant is deleted: restore it first');
      await q.setTenantStatus(sql, row.id, status);
      record(p, status === 'active' ? 'tenant.enable' : status === 'inactive' ? 'tenant.disable' : 'tenant.freeze', row.id, { from: row.status });
      return changed(row.id);
    },

    async remove(p: Principal, id: unknown): Promise<boolean> {
      const row = await lookup(p, id);
      await requirePlatformManage(p, row.id);
      const revoked = await sql.begin(async (tx) => {
        const locked = await q.findTenantForUpdate(tx, row.id);
        if (!locked || locked.deleted_at) throw notFound('tenant');
        const done = await q.softDeleteTenant(tx, row.id, p.entityId);
        const certificates = (await deps.certificates?.deleting(tx, row.id, p.entityId)) ?? 0;
        return { ...done, certificates };
      });
      record(p, 'tenant.delete', row.id, revoked);
      await deps.invalidate({ kind: 'tenants', tenantIds: [row.id] });
      return true;
    },

    async restore(p: Principal, id: unknown): Promise<q.TenantRow> {
      await requirePlatformAdmin(p);
      const row = await load(id);
      if (!row.deleted_at) throw invalidInput('tenant is not deleted');
      const deletedAt = new Date(row.deleted_at).getTime();
      if (Date.now() - deletedAt > deps.retentionSecs * 1000) {
        throw invalidInput(`tenant was deleted more than ${Math.round(deps.retentionSecs / 86400)} days ago and can no longer be restored`);
      }
      // Revoked sessions and certificates stay revoked: members authenticate again.
      await q.restoreTenant(sql, row.id);
      record(p, 'tenant.restore', row.id);
      // Grants loaded while the tenant was deleted left its assignments out, so nothing cached names it:
      // a tenant's invalidation cannot reach them. Restoring is rare; every instance drops everything.
      await deps.invalidate({ kind: 'all' });
      return load(row.id);
    },

    async purge(p: Principal, id: unknown): Promise<boolean> {
      await requirePlatformAdmin(p);
      const row = await load(id);
      if (!row.deleted_at) throw invalidInput('only a deleted tenant can be purged; delete it first');
      await q.purgeTenant(sql, row.id);
      record(p, 'tenant.purge', row.id, { name: row.name });
      await deps.invalidate({ kind: 'tenants', tenantIds: [row.id] });
      return true;
    },
  };
}

export type TenantsService = ReturnType<typeof createTenantsService>;
