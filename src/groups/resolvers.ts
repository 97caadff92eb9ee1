// GraphQL for groups and group membership: argument plumbing only; the rules live in the services.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import { toEntity } from '../identity/index.js';
import type { MembershipService } from './membership.js';
import type { GroupRow } from './queries.js';
import type { GroupService } from './service.js';

export function toGroup(row: GroupRow) {
  return {
    id: row.id,
    name: row.name,
    tenantId: row.tenant_id,
    groupType: row.group_type,
    description: row.description,
    parentId: row.parent_id,
    status: row.status,
    attributes: row.attributes,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: iso(row.deleted_at),
    deletedBy: row.deleted_by,
  };
}

const toList = (page: { total: number; items: GroupRow[] }) => ({ total: page.total, items: page.items.map(toGroup) });

export function groupsGraphqlModule(groups: GroupService, members: MembershipService): GraphqlModule {
  return {
    name: 'groups',
    sdl: readSdl('groups'),
    resolvers: {
      Query: {
        group: authed(async (p, a) => toGroup(await groups.get(p, a.id))),
        groups: authed(async (p, a) => toList(await groups.list(p, a))),
        childGroups: authed(async (p, a) => toList(await groups.childGroups(p, a))),
        objectGroups: authed(async (p, a) => toList(await groups.list(p, a, { groupType: 'object' }))),
        principalGroups: authed(async (p, a) => toList(await groups.list(p, a, { groupType: 'principal' }))),
        groupMembers: authed(async (p, a) => (await members.groupMembers(p, a.groupId)).map(toEntity)),
        entityGroups: authed((p, a) => members.entityGroups(p, a.entityId)),
      },
      Mutation: {
        createGroup: authed(async (p, a) => toGroup(await groups.create(p, a.input as Args))),
        createObjectGroup: authed(async (p, a) => toGroup(await groups.create(p, a.input as Args, 'object'))),
        createPrincipalGroup: authed(async (p, a) => toGroup(await groups.create(p, a.input as Args, 'principal'))),
        updateGroup: authed(async (p, a) => toGroup(await groups.update(p, a.id, a.input as Args))),
        setGroupParent: authed(async (p, a) => toGroup(await groups.setParent(p, a.id, a.parentId))),
        removeGroupParent: authed((p, a) => groups.removeParent(p, a.id)),
        setObjectGroupParent: authed(async (p, a) => toGroup(await groups.setParent(p, a.objectGroupId, a.parentGroupId, { id: 'objectGroupId', parentId: 'parentGroupId' }))),
        removeObjectGroupParent: authed((p, a) => groups.removeParent(p, a.objectGroupId, 'objectGroupId')),
        enableGroup: authed(async (p, a) => toGroup(await groups.setStatus(p, a.id, 'active'))),
        disableGroup: authed(async (p, a) => toGroup(await groups.setStatus(p, a.id, 'inactive'))),
        suspendGroup: authed(async (p, a) => toGroup(await groups.setStatus(p, a.id, 'suspended'))),
        deleteGroup: authed((p, a) => groups.remove(p, a.id)),
        restoreGroup: authed((p, a) => groups.restore(p, a.id)),
        purgeGroup: authed((p, a) => groups.purge(p, a.id)),
        addEntityToObjectGroup: authed(async (p, a) => toEntity(await members.addEntityToObjectGroup(p, a.entityId, a.objectGroupId))),
        removeEntityFromObjectGroup: authed(async (p, a) => toEntity(await members.removeEntityFromObjectGroup(p, a.entityId, a.objectGroupId))),
        clearEntityObjectGroups: authed(async (p, a) => toEntity(await members.clearEntityObjectGroups(p, a.entityId))),
        addGroupMember: authed((p, a, ctx) => members.addGroupMember(p, a.groupId, a.entityId, ctx.requestId)),
        removeGroupMember: authed((p, a) => members.removeGroupMember(p, a.groupId, a.entityId)),
      },
    },
  };
}
