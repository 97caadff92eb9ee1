// Entities (users, devices, services...) and ownerships: the rules of SPEC.md "Entity" and its operations.
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz, Invalidation } from '../authz/types.js';
import type { Queryable, Sql } from '../db/client.js';
import { listingSql, pageOf, type ListResult } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import { createAccessGuard } from '../access/guard.js';
import { readableTenants } from '../access/readable-scope.js';
import * as v from '../validate.js';
import type { ProfilesService } from '../profiles/index.js';
import * as q from './queries.js';

export const ENTITY_KINDS = ['human', 'device', 'service', 'workload', 'application'] as const;
export const ENTITY_STATUSES = ['active', 'inactive', 'suspended'] as const;
/** Every human joins this platform principal group (it lets humans create tenants). */
export const AUTHENTICATED_USERS_GROUP = '00000000-0000-0000-0000-000000000005';

export interface IdentityDeps {
  sql: Sql;
  /** Generic-plan connections for plain list pages (db/paging.ts listingSql); absent: the shared pool. */
  pages?: Sql;
  /** Device types: checks a binding and validates attributes against the bound version's schema. */
  profiles: Pick<ProfilesService, 'bind'>;
  authz: Authz;
  audit: AuditWriter;
  /** Drops every cache that may hold the changed facts (decisions, verified tokens, device keys). */
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the JSON documents it stores and of the JSON filters it takes. */
  documents: v.JsonBounds;
  /** The certificate authority's part in an entity's deletion (wired in the composition root). */
  certificates?: EntityCertificateHooks;
}

export interface EntityCertificateHooks {
  /** Inside the deletion transaction: revokes the entity's certificates (ledger and CRL entries included). */
  deleting(tx: Queryable, entityId: string, actorEntityId: string): Promise<number>;
}

export type EntityListArgs = Record<string, unknown> & { limit?: number | null; offset?: number | null };

export function createIdentityService(deps: IdentityDeps) {
  const { sql, authz, audit } = deps;

  async function load(id: unknown, includeDeleted = false): Promise<q.EntityRow> {
    const row = await q.findEntity(sql, v.uuid('id', id));
    if (!row || (row.deleted_at && !includeDeleted)) throw notFound('entity');
    return row;
  }

  const guard = createAccessGuard({ sql, authz });
  const ref = (row: q.EntityRow) => ({ kind: 'entity' as const, id: row.id });

  /** A live entity by id for an operation of `p`; no such entity answers as guard.missing says. */
  async function lookup(p: Principal, id: unknown): Promise<q.EntityRow> {
    const row = await q.findEntity(sql, v.uuid('id', id));
    if (!row || row.deleted_at) throw await guard.missing(p, 'entity', 'entity', { tenantId: row?.tenant_id });
    return row;
  }

  /** A live entity the caller may read or manage; any other id is answered like one that does not exist. */
  async function visible(p: Principal, id: unknown): Promise<q.EntityRow> {
    const row = await load(id);
    for (const action of ['read', 'manage']) {
      if ((await authz.decide(p, action, ref(row), { readingFrozenTenant: true })).allowed) return row;
    }
    throw notFound('entity');
  }

  /** A change to an entity: the grant first, then the tenant state (frozen tenants refuse changes). */
  function requireWrite(p: Principal, actions: readonly string[], row: q.EntityRow): Promise<void> {
    return guard.requireWrite(p, actions, ref(row), row.tenant_id);
  }

  function record(p: Principal, event: string, row: { id: string; tenant_id: string | null }, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'entity', targetId: row.id, details });
  }

  async function changed(id: string): Promise<q.EntityRow> {
    // Status, attributes and containment feed decisions and token checks: every cache drops them.
    await deps.invalidate({ kind: 'subjects', entityIds: [id] });
    await deps.invalidate({ kind: 'objects', objectIds: [id] });
    return load(id, true);
  }

  return {
    async create(p: Principal, input: Record<string, unknown>): Promise<q.EntityRow> {
      const kind = v.oneOf('kind', input.kind, ENTITY_KINDS);
      const tenantId = v.optionalUuid('tenantId', input.tenantId);
      if (kind === 'human' && tenantId) {
        throw invalidInput('humans are global entities: omit tenantId and grant tenant access through roles or invitations');
      }
      const entity: q.NewEntity = {
        kind,
        name: v.name('name', input.name),
        externalId: externalIdOf(input.externalId),
        alias: v.alias('alias', input.alias),
        tenantId,
        profileId: v.optionalUuid('profileId', input.profileId),
        profileVersionId: v.optionalUuid('profileVersionId', input.profileVersionId),
        attributes: v.jsonDocument('attributes', input.attributes, deps.documents),
      };
      await guard.requireWrite(p, ['manage'], { kind: 'entity', id: null, tenantId }, tenantId);
      const binding = await deps.profiles.bind({ tenantId, kind }, { profileId: entity.profileId, profileVersionId: entity.profileVersionId }, entity.attributes);
      entity.profileId = binding.profileId;
      entity.profileVersionId = binding.profileVersionId;
      const id = await sql.begin(async (tx) => {
        const newId = await q.insertEntity(tx, entity);
        if (kind === 'human') await q.joinPrincipalGroup(tx, AUTHENTICATED_USERS_GROUP, newId);
        return newId;
      });
      record(p, 'entity.create', { id, tenant_id: tenantId }, { kind, name: entity.name });
      return load(id);
    },

    async get(p: Principal, id: unknown): Promise<q.EntityRow> {
      // A soft-deleted object is missing to live reads, whoever asks: lists show it with deleted: deleted
      // or all, and restore and purge still take its id.
      const row = await lookup(p, id);
      await guard.requireRead(p, ref(row));
      return row;
    },

    /** include.groups: whether the items need their object groups (a GraphQL list that shows them). */
    async list(p: Principal, args: EntityListArgs, include = { groups: true }): Promise<ListResult<q.EntityRow>> {
      const tenantId = args.tenantId === undefined || args.tenantId === null ? undefined : v.uuid('tenantId', args.tenantId);
      const deleted = args.deleted === undefined || args.deleted === null ? 'live' : v.oneOf('deleted', args.deleted, v.DELETED_FILTERS);
      if (deleted !== 'live') await guard.requirePlatformAdmin(p);
      const readable = await readableTenants({ authz }, p, 'read', 'entity', tenantId);
      const filter: q.EntityFilter = {
        tenantId,
        readableTenantIds: readable,
        deleted,
        order: args.order === undefined || args.order === null ? 'created_at' : v.oneOf('order', args.order, Object.keys(q.ENTITY_ORDER) as (keyof typeof q.ENTITY_ORDER)[]),
        dir: args.dir === undefined || args.dir === null ? 'asc' : v.oneOf('dir', args.dir, v.SORT_DIRS),
      };
      if (args.kind) filter.kind = v.oneOf('kind', args.kind, ENTITY_KINDS);
      if (args.status) filter.status = v.oneOf('status', args.status, ENTITY_STATUSES);
      if (typeof args.q === 'string' && args.q.trim()) filter.q = args.q.trim();
      if (args.externalId !== undefined && args.externalId !== null) filter.externalId = externalIdOf(args.externalId) ?? '';
      if (args.profileId) filter.profileId = v.uuid('profileId', args.profileId);
      if (args.attributesContains !== undefined && args.attributesContains !== null) {
        filter.attributesContains = v.jsonDocument('attributesContains', args.attributesContains, deps.documents);
      }
      if (args.parentGroupId) {
        filter.parentGroupId = v.uuid('parentGroupId', args.parentGroupId);
        filter.includeDescendants = args.includeDescendants === true;
      }
      return q.listEntities(listingSql(sql, deps.pages, q.plainEntityListing(filter)), filter, pageOf(args, deps.lists), include);
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.EntityRow> {
      const row = await lookup(p, id);
      if ('email' in input || 'password' in input) throw invalidInput('updateEntity never changes email or password');
      const changes: q.EntityChanges = {};
      if (v.given(input, 'name')) changes.name = v.name('name', input.name);
      if (v.given(input, 'attributes')) changes.attributes = v.jsonDocument('attributes', input.attributes, deps.documents);
      if (v.given(input, 'status')) changes.status = v.oneOf('status', input.status, ENTITY_STATUSES);
      // alias and externalId: omitted keeps the value, an explicit null clears it.
      if ('alias' in input) changes.alias = v.alias('alias', input.alias);
      if ('externalId' in input) changes.externalId = externalIdOf(input.externalId);
      // Changing status (the only way to suspend) is administration; other edits accept write too.
      await requireWrite(p, changes.status ? ['manage'] : ['write', 'manage'], row);
      const rebinding = 'profileId' in input || 'profileVersionId' in input;
      if (rebinding || changes.attributes) {
        // The (new or kept) binding's schema validates the attributes the entity will have.
        const wanted = rebinding
          ? { profileId: v.optionalUuid('profileId', input.profileId), profileVersionId: v.optionalUuid('profileVersionId', input.profileVersionId) }
          : { profileId: row.profile_id, profileVersionId: row.profile_version_id };
        const current = { profileId: row.profile_id, profileVersionId: row.profile_version_id };
        const binding = await deps.profiles.bind({ tenantId: row.tenant_id, kind: row.kind }, wanted, changes.attributes ?? row.attributes, current);
        if (rebinding) Object.assign(changes, binding);
      }
      if (!(await q.updateEntity(sql, row.id, changes))) throw notFound('entity');
      record(p, 'entity.update', row, { fields: Object.keys(changes) });
      return changed(row.id);
    },

    async setStatus(p: Principal, id: unknown, status: 'active' | 'inactive'): Promise<q.EntityRow> {
      const row = await lookup(p, id);
      await requireWrite(p, ['manage'], row);
      await q.updateEntity(sql, row.id, { status });
      record(p, status === 'active' ? 'entity.enable' : 'entity.disable', row);
      return changed(row.id);
    },

    async remove(p: Principal, id: unknown): Promise<boolean> {
      const row = await lookup(p, id);
      await requireWrite(p, ['manage', 'delete'], row);
      const done = await sql.begin(async (tx) => {
        if (!(await q.softDeleteEntity(tx, row.id, p.entityId))) return false;
        await deps.certificates?.deleting(tx, row.id, p.entityId);
        return true;
      });
      if (!done) throw notFound('entity');
      record(p, 'entity.delete', row);
      await changed(row.id);
      return true;
    },

    async restore(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('entity is not deleted');
      await q.restoreEntity(sql, row.id);
      record(p, 'entity.restore', row);
      await changed(row.id);
      return true;
    },

    async purge(p: Principal, id: unknown): Promise<boolean> {
      await guard.requirePlatformAdmin(p);
      const row = await load(id, true);
      if (!row.deleted_at) throw invalidInput('only a deleted entity can be purged; delete it first');
      await q.purgeEntity(sql, row.id);
      record(p, 'entity.purge', row);
      await deps.invalidate({ kind: 'subjects', entityIds: [row.id] });
      return true;
    },

    /**
     * Both ends are checked alike: each must be an entity the caller sees (else 'entity not found', as for
     * an unknown id) and manages. The owner lives in the owned entity's tenant; a global owner (a human
     * owning a device) only by a platform administrator's hand. Nothing is written in another tenant.
     */
    async addOwnership(p: Principal, ownerId: unknown, ownedId: unknown, relation: unknown) {
      const owned = await visible(p, ownedId);
      const owner = await visible(p, ownerId);
      if (owner.id === owned.id) throw invalidInput('an entity cannot own itself');
      const rel = relation === undefined || relation === null ? 'owner' : v.name('relation', relation, 64);
      await requireWrite(p, ['manage'], owned);
      await requireWrite(p, ['manage'], owner);
      if (owner.tenant_id !== owned.tenant_id) {
        if (owner.tenant_id !== null) throw invalidInput('the owner must belong to the tenant of the owned entity');
        await guard.requirePlatformAdmin(p);
      }
      const row = await q.insertOwnership(sql, owner.id, owned.id, rel);
      record(p, 'ownership.add', owned, { ownerId: owner.id, relation: rel });
      return row;
    },

    async removeOwnership(p: Principal, ownerId: unknown, ownedId: unknown): Promise<boolean> {
      const owned = await lookup(p, ownedId);
      const owner = v.uuid('ownerId', ownerId);
      await requireWrite(p, ['manage'], owned);
      const removed = await q.deleteOwnership(sql, owner, owned.id);
      if (removed) record(p, 'ownership.remove', owned, { ownerId: owner });
      return removed;
    },

    async ownedEntities(p: Principal, ownerId: unknown): Promise<q.EntityRow[]> {
      const owner = await lookup(p, ownerId);
      await guard.requireRead(p, ref(owner));
      const rows = await q.listOwnedEntities(sql, owner.id);
      const allowed = await Promise.all(rows.map((r) => authz.decide(p, 'read', { kind: 'entity', id: r.id }, { readingFrozenTenant: true })));
      return rows.filter((_, i) => allowed[i]?.allowed);
    },
  };
}

export type IdentityService = ReturnType<typeof createIdentityService>;

/** externalId is opaque and case-sensitive, but surrounding whitespace is never part of it. */
function externalIdOf(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalidInput('externalId must be a string');
  const trimmed = value.trim();
  if (trimmed === '') return null;
  if (trimmed.length > 255) throw invalidInput('externalId must be at most 255 characters');
  return trimmed;
}
