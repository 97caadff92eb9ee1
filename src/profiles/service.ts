// Device types: profiles and their versions, the defaults every new tenant gets, and the binding rules
// entities follow (a disabled profile cannot be bound; a deprecated one keeps its bindings, takes no new ones).
import type { AuditWriter } from '../audit/writer.js';
import type { Principal } from '../auth/principal.js';
import type { Authz } from '../authz/types.js';
import { createAccessGuard } from '../access/guard.js';
import { readableTenants } from '../access/readable-scope.js';
import type { Queryable, Sql } from '../db/client.js';
import { pageOf } from '../db/paging.js';
import { invalidInput, notFound } from '../errors.js';
import * as v from '../validate.js';
import * as q from './queries.js';
import { createSchemaValidator } from './validator.js';

export const PROFILE_STATUSES = ['active', 'deprecated', 'disabled'] as const;
export const VERSION_STATUSES = ['draft', 'active', 'deprecated', 'disabled'] as const;
export const PROFILE_OBJECT_KINDS = ['entity', 'resource', 'group', 'tenant', 'credential'] as const;

/** Allowed status moves; a disabled version is final (nothing may bind to it again). */
const PROFILE_MOVES: Record<string, readonly string[]> = {
  active: ['deprecated', 'disabled'],
  deprecated: ['active', 'disabled'],
  disabled: ['active'],
};
const VERSION_MOVES: Record<string, readonly string[]> = {
  draft: ['active', 'disabled'],
  active: ['deprecated', 'disabled'],
  deprecated: ['active', 'disabled'],
  disabled: [],
};

/** Upstream's default device types, seeded into every new tenant (INTERFACES.md 1.6). */
export const DEFAULT_DEVICE_TYPES = [
  { kind: 'device', key: 'client', displayName: 'Client' },
  { kind: 'device', key: 'gateway', displayName: 'Gateway' },
  { kind: 'device', key: 'water_meter', displayName: 'Water Meter' },
  { kind: 'human', key: 'user', displayName: 'User' },
  { kind: 'service', key: 'service_account', displayName: 'Service Account' },
  { kind: 'workload', key: 'workload', displayName: 'Workload' },
  { kind: 'application', key: 'application', displayName: 'Application' },
] as const;

export interface Binding {
  profileId: string | null;
  profileVersionId: string | null;
}

export function createProfilesService(deps: {
  sql: Sql; authz: Authz; audit: AuditWriter; lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the schemas a version stores. */
  documents: v.JsonBounds;
}) {
  const { sql, authz, audit } = deps;
  const guard = createAccessGuard({ sql, authz });
  const schemas = createSchemaValidator();

  async function load(id: unknown, tx: Queryable = sql, lock = false): Promise<q.ProfileRow> {
    const row = await q.findProfile(tx, v.uuid('id', id), lock);
    if (!row) throw notFound('profile');
    return row;
  }

  /** A profile by id for an operation of `p`; none answers as guard.missing says (profiles read as their tenant). */
  async function lookup(p: Principal, id: unknown): Promise<q.ProfileRow> {
    const row = await q.findProfile(sql, v.uuid('id', id));
    if (!row) throw await guard.missing(p, 'tenant', 'profile');
    return row;
  }

  /** Creating and changing profiles: manage on the owning tenant, or platform administration for platform-wide ones. */
  async function requireManage(p: Principal, tenantId: string | null): Promise<void> {
    if (tenantId === null) return guard.requirePlatformAdmin(p);
    await guard.requireWrite(p, ['manage'], { kind: 'tenant', id: tenantId }, tenantId);
  }

  async function requireRead(p: Principal, row: q.ProfileRow): Promise<void> {
    if (row.tenant_id !== null) await guard.requireRead(p, { kind: 'tenant', id: row.tenant_id }, 'profile');
  }

  function record(p: Principal, event: string, tenantId: string | null, targetKind: string, targetId: string, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind, targetId, details });
  }

  function move(from: string, to: string, moves: Record<string, readonly string[]>, what: string) {
    if (from !== to && !moves[from]?.includes(to)) throw invalidInput(`${what} status cannot change from ${from} to ${to}`);
  }

  return {
    /** In createTenant's transaction: the default device types, each with an active version 1 and empty schemas. */
    async seedTenant(tx: Queryable, tenantId: string): Promise<void> {
      for (const t of DEFAULT_DEVICE_TYPES) {
        const profileId = await q.insertProfile(tx, {
          tenantId, objectKind: 'entity', kind: t.kind, key: t.key, displayName: t.displayName, description: null, status: 'active',
        });
        await q.insertVersion(tx, { profileId, version: 1, jsonSchema: {}, uiSchema: {}, status: 'active' });
      }
    },

    async get(p: Principal, id: unknown): Promise<q.ProfileRow> {
      const row = await lookup(p, id);
      await requireRead(p, row);
      return row;
    },

    async list(p: Principal, args: Record<string, unknown> & { limit?: number | null; offset?: number | null }) {
      const tenantId = args.tenantId ? v.uuid('tenantId', args.tenantId) : undefined;
      const filter: q.ProfileFilter = { readableTenantIds: await readableTenants({ authz }, p, 'read', 'tenant', tenantId) };
      if (tenantId) filter.tenantId = tenantId;
      if (args.objectKind) filter.objectKind = v.oneOf('objectKind', args.objectKind, PROFILE_OBJECT_KINDS);
      if (typeof args.kind === 'string' && args.kind) filter.kind = args.kind;
      if (args.status) filter.status = v.oneOf('status', args.status, PROFILE_STATUSES);
      return q.listProfiles(sql, filter, pageOf(args, deps.lists));
    },

    async versions(p: Principal, profileId: unknown): Promise<q.VersionRow[]> {
      const row = await lookup(p, profileId);
      await requireRead(p, row);
      return q.listVersions(sql, row.id);
    },

    async create(p: Principal, input: Record<string, unknown>): Promise<q.ProfileRow> {
      const profile: q.NewProfile = {
        tenantId: v.optionalUuid('tenantId', input.tenantId),
        objectKind: v.oneOf('objectKind', input.objectKind, PROFILE_OBJECT_KINDS),
        kind: v.name('kind', input.kind, 63),
        key: v.name('key', input.key, 63),
        displayName: v.name('displayName', input.displayName),
        description: v.optionalText('description', input.description),
        status: input.status === undefined || input.status === null ? 'active' : v.oneOf('status', input.status, PROFILE_STATUSES),
      };
      await requireManage(p, profile.tenantId);
      const id = await q.insertProfile(sql, profile);
      record(p, 'profile.create', profile.tenantId, 'profile', id, { key: profile.key, kind: profile.kind });
      return load(id);
    },

    async update(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.ProfileRow> {
      const row = await lookup(p, id);
      await requireManage(p, row.tenant_id);
      const changes: { displayName?: string; description?: string | null; status?: string } = {};
      if (v.given(input, 'displayName')) changes.displayName = v.name('displayName', input.displayName);
      if ('description' in input) changes.description = v.optionalText('description', input.description);
      if (v.given(input, 'status')) {
        changes.status = v.oneOf('status', input.status, PROFILE_STATUSES);
        move(row.status, changes.status, PROFILE_MOVES, 'profile');
      }
      await q.updateProfile(sql, row.id, changes);
      record(p, 'profile.update', row.tenant_id, 'profile', row.id, { fields: Object.keys(changes), status: changes.status });
      return load(row.id);
    },

    async createVersion(p: Principal, profileId: unknown, input: Record<string, unknown>): Promise<q.VersionRow> {
      const pre = await lookup(p, profileId);
      await requireManage(p, pre.tenant_id);
      const version = input.version;
      if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) throw invalidInput('version must be a positive integer');
      const jsonSchema = v.jsonDocument('jsonSchema', input.jsonSchema, deps.documents);
      const uiSchema = v.jsonDocument('uiSchema', input.uiSchema, deps.documents);
      const status = input.status === undefined || input.status === null ? 'draft' : v.oneOf('status', input.status, VERSION_STATUSES);
      schemas.assertCompiles(jsonSchema);
      const id = await sql.begin(async (tx) => {
        // Locked so two new versions cannot both pass the "increasing" check.
        const row = await load(pre.id, tx, true);
        const max = await q.maxVersion(tx, row.id);
        if (version <= max) throw invalidInput(`version must be greater than ${max}, the profile's latest`);
        return q.insertVersion(tx, { profileId: row.id, version, jsonSchema, uiSchema, status });
      });
      record(p, 'profile_version.create', pre.tenant_id, 'profile_version', id, { profileId: pre.id, version, status });
      return (await q.findVersion(sql, id)) as q.VersionRow;
    },

    async updateVersion(p: Principal, id: unknown, input: Record<string, unknown>): Promise<q.VersionRow> {
      const version = await q.findVersion(sql, v.uuid('id', id));
      if (!version) throw await guard.missing(p, 'tenant', 'profile version');
      const profile = await load(version.profile_id);
      await requireManage(p, profile.tenant_id);
      if (v.given(input, 'status')) {
        const status = v.oneOf('status', input.status, VERSION_STATUSES);
        move(version.status, status, VERSION_MOVES, 'profile version');
        await q.setVersionStatus(sql, version.id, status);
        record(p, 'profile_version.update', profile.tenant_id, 'profile_version', version.id, { status });
      }
      return (await q.findVersion(sql, version.id)) as q.VersionRow;
    },

    /**
     * The binding an entity gets, checked: the profile must be visible to the entity's tenant, made for
     * its kind, and neither disabled nor (for a new binding) deprecated; the version must belong to it and
     * be active (newest active when none is named). `current` keeps an existing binding valid as it is.
     * Returns the binding and validates `attributes` against the version's schema.
     */
    async bind(entity: { tenantId: string | null; kind: string }, wanted: Binding, attributes: Record<string, unknown>, current?: Binding): Promise<Binding> {
      if (!wanted.profileId && !wanted.profileVersionId) return { profileId: null, profileVersionId: null };
      let version = wanted.profileVersionId ? await q.findVersion(sql, wanted.profileVersionId) : undefined;
      if (wanted.profileVersionId && !version) throw invalidInput('profileVersionId does not name a profile version');
      const profileId = wanted.profileId ?? (version as q.VersionRow).profile_id;
      const profile = await q.findProfile(sql, profileId);
      if (!profile || (profile.tenant_id !== null && profile.tenant_id !== entity.tenantId)) throw invalidInput('profileId does not name a profile of this tenant');
      if (version && version.profile_id !== profile.id) throw invalidInput('profileVersionId belongs to another profile');
      if (profile.object_kind !== 'entity' || profile.kind !== entity.kind) {
        throw invalidInput(`profile ${profile.key} is for ${profile.object_kind}:${profile.kind}, not entity:${entity.kind}`);
      }
      // A binding the entity already has stays valid whatever the statuses became; only its schema applies.
      const keeps = current?.profileId === profile.id && (!version || current?.profileVersionId === version.id);
      if (!keeps) {
        if (profile.status === 'disabled') throw invalidInput(`profile ${profile.key} is disabled`);
        if (profile.status === 'deprecated') throw invalidInput(`profile ${profile.key} is deprecated and takes no new bindings`);
      }
      version ??= keeps && current?.profileVersionId ? await q.findVersion(sql, current.profileVersionId) : await q.newestActiveVersion(sql, profile.id);
      if (!version) throw invalidInput(`profile ${profile.key} has no active version`);
      if (!(keeps && current?.profileVersionId === version.id) && version.status !== 'active') {
        throw invalidInput(`profile version ${version.version} is ${version.status} and cannot be bound`);
      }
      schemas.check(version.id, version.version, version.json_schema, attributes);
      return { profileId: profile.id, profileVersionId: version.id };
    },
  };
}

export type ProfilesService = ReturnType<typeof createProfilesService>;
