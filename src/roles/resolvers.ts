// GraphQL for roles and role assignments: argument plumbing only; the rules live in the services.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import { listOf, toBlock } from '../policies/index.js';
import type { AssignmentRow } from './assignment-queries.js';
import type { AssignmentService } from './assignments.js';
import type { RoleRow } from './queries.js';
import { derivedKindOf, type RoleService } from './service.js';

export function toRole(row: RoleRow) {
  return {
    id: row.id,
    name: row.name,
    tenantId: row.tenant_id,
    description: row.description,
    derivedKind: derivedKindOf(row),
    permissionBlocks: row.permission_blocks.map(toBlock),
    isSystem: row.is_system,
    deletedAt: iso(row.deleted_at),
    deletedBy: row.deleted_by,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export function toAssignment(row: AssignmentRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    subjectKind: row.subject_kind,
    subjectId: row.subject_id,
    roleId: row.role_id,
    role: toRole(row.role),
    createdAt: iso(row.created_at),
  };
}

export function rolesGraphqlModule(roles: RoleService, assignments: AssignmentService): GraphqlModule {
  return {
    name: 'roles',
    sdl: readSdl('roles'),
    resolvers: {
      Query: {
        roles: authed(async (p, a) => listOf(await roles.list(p, a), toRole)),
        role: authed(async (p, a) => toRole(await roles.get(p, a.id))),
        roleAssignments: authed(async (p, a) => listOf(await assignments.list(p, a), toAssignment)),
      },
      Mutation: {
        createRole: authed(async (p, a, ctx) => toRole(await roles.create(p, a.input as Args, ctx.requestId))),
        updateRole: authed(async (p, a, ctx) => toRole(await roles.update(p, a.id, a.input as Args, ctx.requestId))),
        replaceRolePermissionBlocks: authed((p, a, ctx) => roles.replaceBlocks(p, a.roleId, a.permissionBlockIds, ctx.requestId)),
        deleteRole: authed((p, a, ctx) => roles.remove(p, a.id, ctx.requestId)),
        restoreRole: authed((p, a, ctx) => roles.restore(p, a.id, ctx.requestId)),
        purgeRole: authed((p, a, ctx) => roles.purge(p, a.id, ctx.requestId)),
        createRoleAssignment: authed(async (p, a, ctx) => toAssignment(await assignments.create(p, a.input as Args, ctx.requestId))),
        deleteRoleAssignment: authed((p, a, ctx) => assignments.remove(p, a.id, ctx.requestId)),
      },
    },
  };
}
