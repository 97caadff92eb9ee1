// Revoking an authority: a compromise, distinct from retirement, and a platform decision (pki.provision at
// platform scope; a tenant's own administrators are refused). In one transaction: its certificate's entry in
// its parent's ledger (the platform intermediate's CRL and OCSP publish it), every active leaf it signed
// revoked as ca_compromise, the authority marked revoked (retired, issuing nothing) and the audit event.
// After commit every instance drops its cached issuers, chains and answers (pki.changed, pki.revoked).
import { insertAuditEvents } from '../../audit/index.js';
import type { Principal } from '../../auth/index.js';
import type { Sql } from '../../db/client.js';
import { invalidInput, notFound } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess } from './access.js';
import * as q from './authority-queries.js';
import { revocationReason } from '../x509/der.js';
import type { Registry } from './registry.js';
import type { RevocationService } from '../revocation/revocation.js';

/** The authorities the platform intermediate signs: only their revocation has a CRL in the service. */
const REVOCABLE_KINDS = new Set<q.AuthorityKind>(['tenant_intermediate', 'platform_leaf_issuer']);

export function createAuthorityRevocation(deps: { sql: Sql; access: PkiAccess; registry: Registry; revocation: RevocationService }) {
  const { sql, access, registry, revocation } = deps;

  return {
    /** The authority as revoked; revoking a revoked one answers it unchanged (the first reason stands). */
    async revoke(p: Principal, authorityId: unknown, reasonValue: unknown, requestId: string | null): Promise<q.AuthorityRow> {
      const id = v.uuid('authorityId', authorityId);
      const reason = reasonValue === undefined || reasonValue === null ? 'ca_compromise' : revocationReason(reasonValue);
      // Before anything is read: a tenant administrator learns nothing, not even whether the authority exists.
      await access.requireProvision(p, null);
      const outcome = await sql.begin(async (tx) => {
        const found = await q.selectAuthority(tx, id);
        if (!found) throw notFound('authority');
        await q.lockScope(tx, found.tenant_id === null ? 'platform' : `tenant:${found.tenant_id}`);
        const row = (await q.selectAuthorityForUpdate(tx, id)) as q.AuthorityRow;
        if (!REVOCABLE_KINDS.has(row.kind)) {
          throw invalidInput('only authorities the platform intermediate signed (tenant intermediates, the platform leaf issuer) are revoked here; '
            + 'the root and the platform intermediate are revoked by the operator, in the root\'s CRL (their keys are offline or from configuration)');
        }
        // Already revoked: the first reason stands; any leaf still active under it is swept now (issuance
        // cannot commit one after the revocation: its write reads the issuer FOR SHARE; rows written
        // directly, or before that guard existed, can be there).
        if (row.revoked_at) return { row, entries: await revocation.revokeLeavesOf(tx, row.id, p.entityId, requestId) };
        if (!row.parent_id || !row.serial_number || !row.certificate_der) throw invalidInput(`authority ${row.id} has no certificate to revoke (it is ${row.status})`);
        const entries = await revocation.revokeAuthorityInside(tx, { ...row, parent_id: row.parent_id, serial_number: row.serial_number }, reason, p.entityId, requestId);
        const at = new Date(entries[0]!.revokedAt);
        await q.markAuthorityRevoked(tx, row.id, reason, at, p.entityId);
        const revoked = (await q.selectAuthority(tx, row.id)) as q.AuthorityRow;
        await insertAuditEvents(tx, [{
          event: 'authority.revoke', outcome: 'allow', actorEntityId: p.entityId, tenantId: row.tenant_id, targetKind: 'authority', targetId: row.id,
          requestId, details: {
            kind: row.kind, version: row.version, status_before: row.status, reason, parent_id: row.parent_id, serial_number: row.serial_number,
            leaves_revoked: entries.length - 1,
          },
        }]);
        return { row: revoked, entries };
      });
      if (outcome.entries.length > 0) {
        revocation.committed(outcome.entries);
        await registry.changed({ tenants: [outcome.row.tenant_id], authorities: [outcome.row.id, ...(outcome.row.parent_id ? [outcome.row.parent_id] : [])] });
      }
      return outcome.row;
    },
  };
}

export type AuthorityRevocation = ReturnType<typeof createAuthorityRevocation>;
