// Tenant membership and invitations. Membership records participation; access comes only from role
// assignments, so adding a member with a role and accepting an invitation with one both assign it.
import { createHash, randomBytes } from 'node:crypto';
import type { AuditWriter } from '../audit/writer.js';
import type { Mailer } from '../auth/index.js';
import type { Principal } from '../auth/principal.js';
import type { AuthzService, Invalidation } from '../authz/index.js';
import type { Queryable, Sql } from '../db/client.js';
import { pageOf } from '../db/paging.js';
import { forbidden, invalidInput, notFound } from '../errors.js';
import { assignRoleToEntity, grantableRole } from '../roles/assign.js';
import { deleteEntityGrantsInTenant } from '../roles/assignment-queries.js';
import * as v from '../validate.js';
import * as m from './members-queries.js';
import { findTenant } from './queries.js';
import type { TenantsService } from './service.js';

export const INVITATION_STATES = ['pending', 'accepted', 'rejected', 'revoked'] as const;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const NO_ONE = '00000000-0000-0000-0000-000000000000';

export interface MembersDeps {
  sql: Sql;
  authz: AuthzService;
  audit: AuditWriter;
  mailer: Mailer;
  tenants: TenantsService;
  invalidate: (change: Invalidation) => Promise<void>;
  lists: { defaultLimit: number; maxLimit: number };
  invitationExpirySecs: number;
  publicBaseUrl: string;
}

type Paged = Record<string, unknown> & { limit?: number | null; offset?: number | null };

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export function createMembersService(deps: MembersDeps) {
  const { sql, authz, audit } = deps;

  /** A live tenant the caller may administer (manage, or policy.manage for grants). */
  async function administered(p: Principal, tenantId: unknown) {
    const tenant = await deps.tenants.lookup(p, tenantId);
    const ref = { kind: 'tenant' as const, id: tenant.id };
    if (!(await authz.decide(p, 'manage', ref)).allowed) await authz.require(p, 'policy.manage', ref);
    return tenant;
  }

  async function readable(p: Principal, tenantId: unknown) {
    const tenant = await deps.tenants.lookup(p, tenantId);
    await authz.require(p, 'read', { kind: 'tenant', id: tenant.id }, { readingFrozenTenant: true });
    return tenant;
  }

  function record(p: Principal, event: string, tenantId: string, targetKind: string, targetId: string, details: Record<string, unknown> = {}) {
    audit.record({ event, outcome: 'allow', actorEntityId: p.entityId, tenantId, targetKind, targetId, details });
  }

  /**
   * Membership plus the optional role, in the caller's transaction; returns the overrides to audit. The
   * role goes through the one assignment check (assignRoleToEntity), granted by `grantor`: the caller,
   * or for an invitation the inviter, whose choice of role it was.
   */
  async function join(tx: Queryable, grantor: Principal, tenantId: string, entityId: string, roleId: string | null, operation: string) {
    await m.upsertMembership(tx, tenantId, entityId);
    if (!roleId) return null;
    return assignRoleToEntity(tx, authz, { tenantId, entityId, roleId, actor: grantor, operation });
  }

  /** The inviter as the grantor of an invitation's role (judged as it stands now; gone: no authority). */
  function inviterOf(invitation: m.InvitationRow): Principal {
    return {
      entityId: invitation.invited_by ?? NO_ONE, entityKind: 'human', homeTenantId: null, tenantId: null,
      sessionId: null, credentialId: null, credentialKind: 'session', scoped: false,
    };
  }

  async function afterJoin(p: Principal, tenantId: string, entityId: string, assigned: Awaited<ReturnType<typeof join>>) {
    if (assigned) {
      authz.recordOverrides(assigned.guard, { actor: p, tenantId, operation: 'role_assignment.create', targetKind: 'role_assignment', targetId: assigned.id });
    }
    // Even without a role: the membership connects the entity to the tenant (its cached listing candidates).
    await deps.invalidate({ kind: 'subjects', entityIds: [entityId] });
  }

  /**
   * An entity that may join this tenant: a global one (humans, platform services) or one the tenant owns.
   * Another tenant's entity is answered exactly like an unknown id.
   */
  async function candidateFor(tenantId: string, id: unknown) {
    const entityId = v.uuid('entityId', id);
    const row = await m.findEntityKind(sql, entityId);
    if (!row || row.deleted_at || (row.tenant_id !== null && row.tenant_id !== tenantId)) throw notFound('entity');
    return row;
  }

  return {
    async members(p: Principal, args: Paged) {
      const tenant = await readable(p, args.tenantId);
      const q = typeof args.q === 'string' && args.q.trim() ? args.q.trim() : undefined;
      return m.listMembers(sql, tenant.id, q, pageOf(args, deps.lists));
    },

    async assignable(p: Principal, args: Paged) {
      const q = typeof args.q === 'string' ? args.q.trim() : '';
      if (q.length < 3) throw invalidInput('q must be at least 3 characters');
      const tenant = await administered(p, args.tenantId);
      return m.listAssignable(sql, tenant.id, q, pageOf(args, deps.lists));
    },

    async addMember(p: Principal, tenantId: unknown, entityId: unknown, roleId: unknown): Promise<boolean> {
      const tenant = await administered(p, tenantId);
      const entity = await candidateFor(tenant.id, entityId);
      const role = v.optionalUuid('roleId', roleId);
      const assigned = await sql.begin((tx) => join(tx, p, tenant.id, entity.id, role, 'tenant_member.add'));
      record(p, 'tenant_member.add', tenant.id, 'entity', entity.id, { roleId: role });
      await afterJoin(p, tenant.id, entity.id, assigned);
      return true;
    },

    async removeMember(p: Principal, tenantId: unknown, entityId: unknown): Promise<boolean> {
      const tenant = await administered(p, tenantId);
      const entity = v.uuid('entityId', entityId);
      const removed = await sql.begin(async (tx) => {
        const left = await m.leaveMembership(tx, tenant.id, entity);
        const grants = await deleteEntityGrantsInTenant(tx, tenant.id, entity);
        return left || grants > 0;
      });
      if (!removed) throw notFound('tenant member');
      record(p, 'tenant_member.remove', tenant.id, 'entity', entity);
      await deps.invalidate({ kind: 'subjects', entityIds: [entity] });
      return true;
    },

    async myRoles(p: Principal, tenantId: unknown) {
      const tenant = await deps.tenants.load(tenantId);
      if (tenant.deleted_at) throw notFound('tenant');
      return m.rolesInTenant(sql, tenant.id, p.entityId);
    },

    async invite(p: Principal, tenantId: unknown, input: Record<string, unknown>) {
      const tenant = await administered(p, tenantId);
      const userId = v.optionalUuid('inviteeUserId', input.inviteeUserId);
      let email = typeof input.inviteeEmail === 'string' ? input.inviteeEmail.trim().toLowerCase() : null;
      if (!userId && !email) throw invalidInput('give inviteeUserId or inviteeEmail');
      if (email && !EMAIL.test(email)) throw invalidInput('inviteeEmail is not an email address');
      if (userId) {
        const user = await candidateFor(tenant.id, userId);
        if (user.kind !== 'human') throw invalidInput('only humans can be invited');
        email ??= (await m.emailOf(sql, userId)) ?? null;
      }
      const roleId = v.optionalUuid('roleId', input.roleId);
      const redirectUrl = v.optionalText('redirectUrl', input.redirectUrl, 2048);
      const token = email ? randomBytes(32).toString('base64url') : null;
      const id = await sql.begin(async (tx) => {
        // The role is judged now as far as it can be without the invitee (who may not exist yet): a role of
        // this tenant, or a platform role the caller may grant. Accepting runs the whole check.
        if (roleId) await grantableRole(tx, authz, { tenantId: tenant.id, roleId, actor: p });
        // resend: the earlier pending invitation (and its token) is replaced by a fresh one.
        if (input.resend === true) await m.revokePendingInvitations(tx, tenant.id, userId, email);
        return m.insertInvitation(tx, {
          tenantId: tenant.id, inviteeUserId: userId, inviteeEmail: email, roleId, invitedBy: p.entityId,
          tokenHash: token ? hashToken(token) : null, redirectUrl, expiresAt: new Date(Date.now() + deps.invitationExpirySecs * 1000),
        });
      });
      if (email && token) {
        const link = `${redirectUrl ?? `${deps.publicBaseUrl}/invitations/accept`}?token=${encodeURIComponent(token)}`;
        await deps.mailer.send({
          to: email,
          subject: `You are invited to ${tenant.name}`,
          text: `You have been invited to the workspace "${tenant.name}".\nAccept the invitation: ${link}\nInvitation token: ${token}\n`,
        });
      }
      record(p, 'tenant_invitation.create', tenant.id, 'tenant_invitation', id, { inviteeUserId: userId, inviteeEmail: email, roleId });
      return (await m.findInvitation(sql, id)) as m.InvitationRow;
    },

    async invitations(p: Principal, args: Paged) {
      const tenant = await administered(p, args.tenantId);
      const state = args.state ? v.oneOf('state', args.state, INVITATION_STATES) : 'pending';
      return m.listInvitations(sql, { tenantId: tenant.id, state }, pageOf(args, deps.lists));
    },

    async myInvitations(p: Principal, args: Paged) {
      const state = args.state ? v.oneOf('state', args.state, INVITATION_STATES) : 'pending';
      return m.listInvitations(sql, { entityId: p.entityId, state }, pageOf(args, deps.lists));
    },

    async respond(p: Principal, tenantId: unknown, accept: boolean): Promise<boolean> {
      // The caller's own invitation is what is looked up: no tenant, or a deleted one, holds none for it,
      // so whether the tenant exists is not told apart.
      const tenant = await findTenant(sql, v.uuid('id', tenantId));
      if (!tenant || tenant.deleted_at) throw notFound('pending invitation');
      const assigned = await sql.begin(async (tx) => {
        const invitation = await m.findPendingInvitationFor(tx, tenant.id, p.entityId);
        if (!invitation || new Date(invitation.expires_at).getTime() < Date.now()) throw notFound('pending invitation');
        await m.setInvitationState(tx, invitation.id, accept ? 'accepted' : 'rejected', p.entityId);
        return accept ? join(tx, inviterOf(invitation), tenant.id, p.entityId, invitation.role_id, 'tenant_invitation.accept') : null;
      });
      record(p, accept ? 'tenant_invitation.accept' : 'tenant_invitation.reject', tenant.id, 'tenant', tenant.id);
      await afterJoin(p, tenant.id, p.entityId, assigned);
      return true;
    },

    /** The emailed token proves the invitation reached its addressee; the logged-in caller joins. */
    async acceptToken(p: Principal, input: Record<string, unknown>): Promise<string> {
      const token = v.name('token', input?.token, 512);
      if (p.entityKind !== 'human') throw forbidden();
      const result = await sql.begin(async (tx) => {
        const invitation = await m.findPendingInvitationByToken(tx, hashToken(token));
        if (!invitation || new Date(invitation.expires_at).getTime() < Date.now()) throw notFound('pending invitation');
        if (invitation.invitee_user_id && invitation.invitee_user_id !== p.entityId) throw forbidden();
        await m.setInvitationState(tx, invitation.id, 'accepted', p.entityId);
        const assigned = await join(tx, inviterOf(invitation), invitation.tenant_id, p.entityId, invitation.role_id, 'tenant_invitation.accept');
        return { tenantId: invitation.tenant_id, assigned };
      });
      record(p, 'tenant_invitation.accept', result.tenantId, 'tenant', result.tenantId, { via: 'token' });
      await afterJoin(p, result.tenantId, p.entityId, result.assigned);
      return result.tenantId;
    },

    async revoke(p: Principal, tenantId: unknown, invitationId: unknown): Promise<boolean> {
      const tenant = await administered(p, tenantId);
      const invitation = await m.findInvitation(sql, v.uuid('invitationId', invitationId));
      if (!invitation || invitation.tenant_id !== tenant.id) throw notFound('invitation');
      if (invitation.state !== 'pending') throw invalidInput(`invitation is already ${invitation.state}`);
      await m.setInvitationState(sql, invitation.id, 'revoked');
      record(p, 'tenant_invitation.revoke', tenant.id, 'tenant_invitation', invitation.id);
      return true;
    },
  };
}

export type MembersService = ReturnType<typeof createMembersService>;
