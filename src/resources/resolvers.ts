// GraphQL for resources: argument plumbing only; the rules live in service.ts.
import { iso } from '../graphql/mapping.js';
import { itemFields, wantsAny } from '../graphql/selection.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import type { ResourceRow } from './queries.js';
import type { ResourceService } from './service.js';

export function toResource(row: ResourceRow) {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    alias: row.alias,
    tenantId: row.tenant_id,
    ownerId: row.owner_id,
    attributes: row.attributes,
    objectGroupIds: row.object_group_ids,
    parentGroupId: row.object_group_ids[0] ?? null,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: iso(row.deleted_at),
    deletedBy: row.deleted_by,
  };
}

export function resourcesGraphqlModule(service: ResourceService): GraphqlModule {
  return {
    name: 'resources',
    sdl: readSdl('resources'),
    resolvers: {
      Query: {
        resource: authed(async (p, a) => toResource(await service.get(p, a.id))),
        resources: authed(async (p, a, _ctx, info) => {
          const page = await service.list(p, a, { groups: wantsAny(itemFields(info), 'objectGroupIds', 'parentGroupId') });
          return { total: page.total, items: page.items.map(toResource) };
        }),
        resourceKinds: authed((p, a) => service.kinds(p, a.tenantId)),
      },
      Mutation: {
        createResource: authed(async (p, a) => toResource(await service.create(p, a.input as Args))),
        updateResource: authed(async (p, a) => toResource(await service.update(p, a.id, a.input as Args))),
        deleteResource: authed((p, a) => service.remove(p, a.id)),
        restoreResource: authed((p, a) => service.restore(p, a.id)),
        purgeResource: authed((p, a) => service.purge(p, a.id)),
        addResourceToObjectGroup: authed(async (p, a) => toResource(await service.addToObjectGroup(p, a.resourceId, a.objectGroupId))),
        removeResourceFromObjectGroup: authed(async (p, a) => toResource(await service.removeFromObjectGroup(p, a.resourceId, a.objectGroupId))),
        clearResourceObjectGroups: authed(async (p, a) => toResource(await service.clearObjectGroups(p, a.resourceId))),
      },
    },
  };
}
