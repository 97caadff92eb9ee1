// Provisioning and retirement of the authorities the service makes: the platform leaf issuer and one
// tenant intermediate per tenant (automatic once a platform intermediate is active, for tenants that
// exist and tenants created later), new versions, the hand-over between versions, and retirement.
// Every change of one tenant's (or the platform's) authorities runs under that scope's advisory lock.
import { randomUUID } from 'node:crypto';
import { insertAuditEvents } from '../../audit/index.js';
import type { Queryable, Sql } from '../../db/client.js';
import { AppError, conflict, invalidInput } from '../../errors.js';
import type { Logger } from '../../log.js';
import { makeIssuingAuthority, type AuthoritySettings } from './authority-certs.js';
import * as q from './authority-queries.js';
import type { CaKeys } from '../keys/types.js';
import { DEFAULT_PROFILE_ID } from '../profiles/profile-queries.js';
import type { Registry } from './registry.js';

export interface Actor {
  entityId: string | null;
  requestId?: string | null;
}

type LeafIssuerKind = 'platform_leaf_issuer' | 'tenant_intermediate';

/** A provisioning that cannot happen in the present state (GraphQL reports it as validationError). */
export class ProvisioningRefused extends AppError {
  constructor(message: string) {
    super('CONFLICT', message);
  }
}

const scopeOf = (tenantId: string | null) => (tenantId === null ? 'platform' : `tenant:${tenantId}`);

/** Why a scope whose newest authority was revoked issues nothing until an administrator provisions a successor. */
export function revokedMessage(row: q.AuthorityRow): string {
  return `the certificate authority ${row.id} (${row.kind.replace(/_/g, ' ')}) was revoked (${row.revocation_reason ?? 'unspecified'}) `
    + `at ${row.revoked_at?.toISOString()} and issues nothing: a platform administrator provisions its successor `
    + '(provisionTenantAuthorityAutomatically, or beginTenantAuthorityProvisioning then transitionRetirement)';
}

function subjectFor(kind: LeafIssuerKind, tenantId: string | null, id: string): string {
  const tag = id.slice(0, 8);
  return kind === 'tenant_intermediate' ? `CN=tenant-${tenantId} CA ${tag}` : `CN=platform leaf issuer ${tag}`;
}

export function createProvisioning(deps: { sql: Sql; keys: CaKeys; registry: Registry; settings: AuthoritySettings; log: Logger }) {
  const { sql, keys, registry, settings, log } = deps;

  const audit = (tx: Queryable, actor: Actor, event: string, row: q.AuthorityRow, details: Record<string, unknown> = {}) =>
    insertAuditEvents(tx, [{
      event, outcome: 'allow', actorEntityId: actor.entityId, tenantId: row.tenant_id, targetKind: 'authority', targetId: row.id,
      requestId: actor.requestId ?? null, details: { kind: row.kind, version: row.version, status: row.status, ...details },
    }]);

  async function tenantState(tx: Queryable, tenantId: string): Promise<void> {
    const [t] = await tx<{ status: string; deleted: boolean }[]>`select status, deleted_at is not null as deleted from tenants where id = ${tenantId}`;
    if (!t || t.deleted) throw new ProvisioningRefused('tenant not found or deleted');
  }

  /**
   * Makes a new version of a leaf issuer under its scope's lock. `when` decides inside the lock: 'missing'
   * provisions only when no active one exists (automatic), 'stale' also when the active one hangs under a
   * platform intermediate that is no longer active, 'always' adds a version. activate: the new
   * version becomes active at once and the active one it replaces starts retiring.
   */
  async function provision(kind: LeafIssuerKind, tenantId: string | null, options: { when: 'missing' | 'stale' | 'always'; activate: boolean; mode: 'automatic' | 'manual'; actor: Actor }) {
    const outcome = await sql.begin(async (tx) => {
      await q.lockScope(tx, scopeOf(tenantId));
      if (tenantId !== null) await tenantState(tx, tenantId);
      const current = await q.selectActive(tx, kind, tenantId);
      const parent = await q.selectActive(tx, 'platform_intermediate', null);
      const unchanged = options.when === 'missing' || (options.when === 'stale' && current?.parent_id === parent?.id);
      if (current && unchanged) return { authority: current, replaced: [] as string[], created: false };
      if (!current && options.when !== 'always' && kind === 'tenant_intermediate') {
        // A compromised authority's successor is an administrator's decision (an explicit provisioning), not automatic.
        const newest = await q.selectNewest(tx, kind, tenantId);
        if (newest?.revoked_at) throw new ProvisioningRefused(revokedMessage(newest));
      }
      if (!options.activate) {
        const [pending] = await tx<{ id: string }[]>`
          select id from pki_authorities where kind = ${kind} and status = 'pending'
            and ${tenantId === null ? tx`tenant_id is null` : tx`tenant_id = ${tenantId}`} limit 1`;
        if (pending) throw conflict(`a pending authority (${pending.id}) is waiting already: transition to it or retire it first`);
      }
      if (!parent) throw new ProvisioningRefused('no active platform intermediate: configure SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH and SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH');
      const version = await q.nextVersion(tx, kind, tenantId);
      const made = await makeIssuingAuthority(keys, settings, parent, {
        kind, tenantId, version, mode: options.mode, createdBy: options.actor.entityId,
        defaultProfileId: current?.default_profile_id ?? DEFAULT_PROFILE_ID,
      }, (id) => subjectFor(kind, tenantId, id));
      const replaced = options.activate && current ? [current.id] : [];
      await q.beginRetirement(tx, replaced);
      const row = await q.insertAuthority(tx, made.id, { ...made.fields, status: options.activate ? 'active' : 'pending', issuanceEnabled: options.activate });
      await audit(tx, options.actor, 'authority.provision', row, { mode: options.mode, replaced_authority_ids: replaced, parent_id: parent.id });
      return { authority: row, replaced, created: true };
    });
    if (outcome.created) await registry.changed({ tenants: [tenantId], authorities: outcome.replaced });
    return outcome;
  }

  /** Records a provisioning that failed (backend down, token full), so the operator sees why. */
  async function recordFailure(kind: LeafIssuerKind, tenantId: string | null, actor: Actor, err: unknown): Promise<void> {
    const reason = err instanceof Error ? err.message : String(err);
    try {
      await sql.begin(async (tx) => {
        await q.lockScope(tx, scopeOf(tenantId));
        const version = await q.nextVersion(tx, kind, tenantId);
        const row = await q.insertAuthority(tx, randomUUID(), {
          tenantId, parentId: null, kind, version, status: 'failed', issuanceEnabled: false, subject: subjectFor(kind, tenantId, 'failed--'),
          serialNumber: null, fingerprintSha256: null, subjectKeyId: null, authorityKeyId: null, certificateDer: null, csrPem: null,
          keyBackend: null, keyRef: null, keyAlgorithm: null, provisioningMode: 'automatic', failureReason: reason.slice(0, 1000),
          defaultProfileId: null, urls: null, notBefore: null, notAfter: null, createdBy: actor.entityId,
        });
        await audit(tx, actor, 'authority.provision_failed', row, { reason: reason.slice(0, 1000) });
      });
    } catch (e) {
      log.warn('recording a failed authority provisioning failed', { err: String(e) });
    }
  }

  async function loadForChange(tx: Queryable, id: string): Promise<q.AuthorityRow> {
    const row = await q.selectAuthority(tx, id);
    if (!row) throw new AppError('NOT_FOUND', 'authority not found');
    await q.lockScope(tx, scopeOf(row.tenant_id));
    const locked = await q.selectAuthorityForUpdate(tx, id);
    if (!locked) throw new AppError('NOT_FOUND', 'authority not found');
    if (locked.kind === 'root' || locked.kind === 'platform_intermediate') {
      throw invalidInput('the root and the platform intermediate come from configuration: change SVC_PKI_* settings to replace them');
    }
    return locked;
  }

  /** Automatic provisioning for one tenant when it has no active issuer; null when it cannot happen now. */
  async function ensureTenantIssuer(tenantId: string, actor: Actor): Promise<q.AuthorityRow | null> {
    // Without a platform intermediate there is nothing to do: no lock, no transaction (every tenant creation asks).
    if (!(await q.selectActive(sql, 'platform_intermediate', null))) return null;
    try {
      return (await provision('tenant_intermediate', tenantId, { when: 'missing', activate: true, mode: 'automatic', actor })).authority;
    } catch (err) {
      if (err instanceof ProvisioningRefused) return null;
      throw err;
    }
  }

  return {
    provision,
    recordFailure,
    ensureTenantIssuer,
    /** When the scope's newest leaf issuer was revoked: why nothing is issued (issuance's refusal); else null. */
    async revokedRefusal(kind: LeafIssuerKind, tenantId: string | null): Promise<string | null> {
      const newest = await q.selectNewest(sql, kind, tenantId);
      return newest?.revoked_at ? revokedMessage(newest) : null;
    },

    /** The platform leaf issuer under the active platform intermediate: made when missing or when its parent changed. */
    async ensurePlatformLeafIssuer(): Promise<q.AuthorityRow | null> {
      const parent = await q.selectActive(sql, 'platform_intermediate', null);
      if (!parent) return null;
      const current = await q.selectActive(sql, 'platform_leaf_issuer', null);
      if (current && current.parent_id === parent.id) return current;
      return (await provision('platform_leaf_issuer', null, { when: 'stale', activate: true, mode: 'automatic', actor: { entityId: null } })).authority;
    },

    /** pending → active; the active version of the same scope starts retiring. */
    async transition(id: string, actor: Actor): Promise<q.AuthorityRow> {
      const result = await sql.begin(async (tx) => {
        const row = await loadForChange(tx, id);
        if (row.status !== 'pending') throw invalidInput(`only a pending authority can take over (this one is ${row.status})`);
        if (row.tenant_id !== null) await tenantState(tx, row.tenant_id);
        const current = await q.selectActive(tx, row.kind, row.tenant_id);
        const replaced = current ? [current.id] : [];
        await q.beginRetirement(tx, replaced);
        await q.activate(tx, row.id);
        const updated = (await q.selectAuthority(tx, row.id)) as q.AuthorityRow;
        await audit(tx, actor, 'authority.transition', updated, { replaced_authority_ids: replaced });
        return { row: updated, replaced };
      });
      await registry.changed({ tenants: [result.row.tenant_id], authorities: [result.row.id, ...result.replaced] });
      return result.row;
    },

    /** active → retiring: it issues no more leaves; CRL and OCSP go on. */
    async beginRetirement(id: string, actor: Actor): Promise<q.AuthorityRow> {
      const row = await sql.begin(async (tx) => {
        const locked = await loadForChange(tx, id);
        if (locked.status !== 'active') throw invalidInput(`only an active authority can begin retirement (this one is ${locked.status})`);
        await q.beginRetirement(tx, [locked.id]);
        const updated = (await q.selectAuthority(tx, locked.id)) as q.AuthorityRow;
        await audit(tx, actor, 'authority.retirement_begin', updated);
        return updated;
      });
      await registry.changed({ tenants: [row.tenant_id], authorities: [row.id] });
      return row;
    },

    /** retiring (or a pending version never used) → retired; retired versions keep answering CRL and OCSP. */
    async completeRetirement(id: string, actor: Actor): Promise<q.AuthorityRow> {
      const row = await sql.begin(async (tx) => {
        const locked = await loadForChange(tx, id);
        if (locked.status !== 'retiring' && locked.status !== 'pending') {
          throw invalidInput(`only a retiring or pending authority can complete retirement (this one is ${locked.status}); call beginAuthorityRetirement first`);
        }
        await q.completeRetirement(tx, [locked.id]);
        const updated = (await q.selectAuthority(tx, locked.id)) as q.AuthorityRow;
        await audit(tx, actor, 'authority.retirement_complete', updated);
        return updated;
      });
      await registry.changed({ tenants: [row.tenant_id], authorities: [row.id] });
      return row;
    },

    /** Tenants without an active issuer get one, a page at a time; failures are logged and retried next time. */
    async reconcileTenants(options: { pageSize: number; isStopping: () => boolean }): Promise<number> {
      let made = 0;
      const failed = new Set<string>();
      while (!options.isStopping()) {
        const ids = (await q.tenantsWithoutIssuer(sql, options.pageSize + failed.size)).filter((id) => !failed.has(id));
        if (ids.length === 0) break;
        for (const id of ids) {
          if (options.isStopping()) break;
          try {
            if (await ensureTenantIssuer(id, { entityId: null })) made++;
            else failed.add(id);
          } catch (err) {
            failed.add(id);
            log.warn('automatic tenant authority provisioning failed', { tenant_id: id, err: String(err) });
          }
        }
      }
      return made;
    },
  };
}

export type Provisioning = ReturnType<typeof createProvisioning>;
