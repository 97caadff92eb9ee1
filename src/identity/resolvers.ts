// GraphQL for entities and ownerships: argument plumbing only; the rules live in service.ts.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { itemFields, wantsAny } from '../graphql/selection.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { EntityRow } from './queries.js';
import type { IdentityService } from './service.js';

export function toEntity(row: EntityRow) {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    externalId: row.external_id,
    alias: row.alias,
    tenantId: row.tenant_id,
    profileId: row.profile_id,
    profileVersionId: row.profile_version_id,
    status: row.status,
    attributes: row.attributes,
    objectGroupIds: row.object_group_ids,
    parentGroupId: row.object_group_ids[0] ?? null,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: iso(row.deleted_at),
    deletedBy: row.deleted_by,
  };
}

export function identityGraphqlModule(service: IdentityService): GraphqlModule {
  return {
    name: 'identity',
    sdl: readSdl('identity'),
    resolvers: {
      Query: {
        entity: authed(async (p, a) => toEntity(await service.get(p, a.id))),
        entities: authed(async (p, a, _ctx, info) => {
          const page = await service.list(p, a, { groups: wantsAny(itemFields(info), 'objectGroupIds', 'parentGroupId') });
          return { total: page.total, items: page.items.map(toEntity) };
        }),
        ownedEntities: authed(async (p, a) => (await service.ownedEntities(p, a.ownerId)).map(toEntity)),
      },
      Mutation: {
        createEntity: authed(async (p, a) => toEntity(await service.create(p, a.input as Args))),
        updateEntity: authed(async (p, a) => toEntity(await service.update(p, a.id, a.input as Args))),
        enableEntity: authed(async (p, a) => toEntity(await service.setStatus(p, a.id, 'active'))),
        disableEntity: authed(async (p, a) => toEntity(await service.setStatus(p, a.id, 'inactive'))),
        deleteEntity: authed((p, a) => service.remove(p, a.id)),
        restoreEntity: authed((p, a) => service.restore(p, a.id)),
        purgeEntity: authed((p, a) => service.purge(p, a.id)),
        addOwnership: authed(async (p, a) => {
          const row = await service.addOwnership(p, a.ownerId, a.ownedId, a.relation);
          return { ownerId: row.owner_id, ownedId: row.owned_id, relation: row.relation, createdAt: iso(row.created_at) };
        }),
        removeOwnership: authed((p, a) => service.removeOwnership(p, a.ownerId, a.ownedId)),
      },
    },
  };
}
