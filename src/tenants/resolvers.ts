// GraphQL for tenants, memberships and invitations: argument plumbing only; rules live in the services.
import { iso } from '../graphql/mapping.js';
import { authed, type Args } from '../graphql/resolve.js';
import { readSdl, type GraphqlModule } from '../graphql/schema.js';
import { toEntity } from '../identity/index.js';
import type { InvitationRow } from './members-queries.js';
import type { MembersService } from './members-service.js';
import type { TenantRow } from './queries.js';
import type { TenantsService } from './service.js';

export function toTenant(row: TenantRow) {
  return {
    id: row.id,
    name: row.name,
    alias: row.alias,
    status: row.status,
    tags: row.tags,
    attributes: row.attributes,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    deletedAt: iso(row.deleted_at),
    deletedBy: row.deleted_by,
  };
}

function toInvitation(row: InvitationRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    inviteeUserId: row.invitee_user_id,
    inviteeName: row.invitee_name,
    inviteeEmail: row.invitee_email,
    invitedBy: row.invited_by,
    roleId: row.role_id,
    roleName: row.role_name,
    state: row.state,
    expiresAt: iso(row.expires_at),
    acceptedAt: iso(row.accepted_at),
    rejectedAt: iso(row.rejected_at),
    revokedAt: iso(row.revoked_at),
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

const list = <R, T>(page: { total: number; items: R[] }, map: (r: R) => T) => ({ total: page.total, items: page.items.map(map) });

export function tenantsGraphqlModule(tenants: TenantsService, members: MembersService): GraphqlModule {
  return {
    name: 'tenants',
    sdl: readSdl('tenants'),
    resolvers: {
      Query: {
        tenant: authed(async (p, a) => toTenant(await tenants.get(p, a.id))),
        tenants: authed(async (p, a) => list(await tenants.list(p, a), toTenant)),
        tenantMembers: authed(async (p, a) => list(await members.members(p, a), toEntity)),
        tenantAssignableEntities: authed(async (p, a) => list(await members.assignable(p, a), toEntity)),
        myTenantRoles: authed(async (p, a) => (await members.myRoles(p, a.tenantId)).map((r) => ({
          roleId: r.role_id, roleName: r.role_name, actions: r.actions, assignmentPaths: r.paths,
        }))),
        tenantInvitations: authed(async (p, a) => list(await members.invitations(p, a), toInvitation)),
        myTenantInvitations: authed(async (p, a) => list(await members.myInvitations(p, a), toInvitation)),
      },
      Mutation: {
        createTenant: authed(async (p, a) => toTenant(await tenants.create(p, a.input as Args))),
        updateTenant: authed(async (p, a) => toTenant(await tenants.update(p, a.id, a.input as Args))),
        enableTenant: authed(async (p, a) => toTenant(await tenants.setStatus(p, a.id, 'active'))),
        disableTenant: authed(async (p, a) => toTenant(await tenants.setStatus(p, a.id, 'inactive'))),
        freezeTenant: authed(async (p, a) => toTenant(await tenants.setStatus(p, a.id, 'frozen'))),
        deleteTenant: authed((p, a) => tenants.remove(p, a.id)),
        restoreTenant: authed(async (p, a) => toTenant(await tenants.restore(p, a.id))),
        purgeTenant: authed((p, a) => tenants.purge(p, a.id)),
        addTenantMember: authed((p, a) => members.addMember(p, a.tenantId, a.entityId, a.roleId)),
        removeTenantMember: authed((p, a) => members.removeMember(p, a.tenantId, a.entityId)),
        createTenantInvitation: authed(async (p, a) => toInvitation(await members.invite(p, a.tenantId, a.input as Args))),
        acceptTenantInvitation: authed((p, a) => members.respond(p, a.tenantId, true)),
        rejectTenantInvitation: authed((p, a) => members.respond(p, a.tenantId, false)),
        revokeTenantInvitation: authed((p, a) => members.revoke(p, a.tenantId, a.invitationId)),
        acceptTenantInvitationToken: authed((p, a) => members.acceptToken(p, a.input as Args)),
      },
    },
  };
}
