// Who may manage whose credentials: the entity itself (own password, own tokens), or manage on
// credentials at the scope of the entity's OWNING tenant (platform scope for global entities), or
// manage on the entity. Membership never counts; scoped tokens never manage credentials.
import type { Authz } from '../authz/types.js';
import { missingAnswer } from '../access/guard.js';
import { forbidden, type AppError } from '../errors.js';
import type { Principal } from './principal.js';
import type { EntityRow } from './queries.js';

export type CredentialAccess = 'manage' | 'read';
const CREDENTIAL_READ = ['manage', 'read'] as const;

export function createCredentialAuthority(authz: Authz) {
  async function allowed(principal: Principal, entity: EntityRow, access: CredentialAccess, allowSelf: boolean): Promise<boolean> {
    if (principal.scoped) return false;
    if (allowSelf && principal.entityId === entity.id) return true;
    const scope = { kind: 'credential' as const, id: null, tenantId: entity.tenant_id };
    if ((await authz.decide(principal, 'manage', scope)).allowed) return true;
    if (access === 'read' && (await authz.decide(principal, 'read', scope)).allowed) return true;
    return (await authz.decide(principal, 'manage', { kind: 'entity', id: entity.id, tenantId: entity.tenant_id })).allowed;
  }

  /** The answer to a credential (or its entity) that is not there, to a caller of credential operations. */
  function missing(principal: Principal, what: string, tenantId?: string | null): Promise<AppError> {
    return missingAnswer(authz, principal, 'credential', what, { tenantId, actions: CREDENTIAL_READ });
  }

  return {
    allowed,
    missing,
    /**
     * FORBIDDEN when the caller has no authority over the entity; a missing or deleted entity answers as
     * guard.missing says (NOT_FOUND only to a caller reading credentials at platform scope, or in the
     * deleted entity's tenant), so a refused caller cannot tell another tenant's entity from an unused id.
     */
    async require(principal: Principal, entity: EntityRow | null, access: CredentialAccess, allowSelf = true): Promise<EntityRow> {
      if (!entity || entity.deleted) throw await missing(principal, 'entity', entity?.tenant_id);
      if (!(await allowed(principal, entity, access, allowSelf))) throw forbidden();
      return entity;
    },
  };
}

export type CredentialAuthority = ReturnType<typeof createCredentialAuthority>;
