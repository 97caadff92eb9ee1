// Revocation: one certificate (by credential id, SHA-256 fingerprint, or issuer and serial), all of an
// entity's, bulk by tenant, issuer or principal group (cursor pages over a snapshot), and the cascades of
// tenant and entity deletion. Each revocation writes its ledger entry (with the CRL entry DER), the
// credential, its audit event and outbox record in one transaction, and NOTIFYs every instance.
import { insertAuditEvents, type AuditWriter } from '../../audit/index.js';
import type { Principal } from '../../auth/index.js';
import type { Queryable, Sql } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import { pageOf } from '../../db/paging.js';
import { forbidden, invalidInput, notFound } from '../../errors.js';
import * as v from '../../validate.js';
import type { PkiAccess, SubjectEntity } from '../authorities/access.js';
import { selectAuthority } from '../authorities/authority-queries.js';
import * as cq from '../issuance/certificate-queries.js';
import { crlEntryDer, revocationReason, type RevocationReason } from '../x509/der.js';
import { missingTo, type Caller } from '../issuance/issuance.js';
import { REVOKED_TOPIC, ledgerEntryFor, revocationAudit, revocationInstant, revocationOutbox, revokedPayload, type RevokedNotice } from './revocation-events.js';
import * as rq from './revocation-queries.js';

export interface RevokeInput {
  credentialId?: unknown;
  fingerprintSha256?: unknown;
  issuerId?: unknown;
  serialNumber?: unknown;
  reason?: unknown;
}

export interface Revocation {
  certificate: cq.CertificateRow;
  reason: RevocationReason;
  actorEntityId: string | null;
  revokedAt: Date;
  idempotentReplay: boolean;
}

/** What revoking an authority's own certificate needs of its row (one the platform intermediate signed). */
export interface AuthorityRevocable {
  id: string;
  parent_id: string;
  serial_number: string;
  tenant_id: string | null;
  fingerprint_sha256: string | null;
  not_after: Date | null;
}

export interface BulkInput {
  tenantId?: unknown;
  issuerId?: unknown;
  principalGroupId?: unknown;
  reason?: unknown;
  afterCredentialId?: unknown;
  snapshotAt?: unknown;
  limit?: number | null;
}

const ZERO_UUID = '00000000-0000-0000-0000-000000000000';

/** Serial as credentials store it: lowercase hex, no separators, no leading zero octets. */
export function normaliseSerial(value: unknown): string {
  if (typeof value !== 'string') throw invalidInput('serialNumber must be a hex string');
  const hex = value.trim().toLowerCase().replace(/^0x/, '').replace(/[:\s]/g, '');
  if (!/^[0-9a-f]{1,64}$/.test(hex)) throw invalidInput('serialNumber must be a hex string');
  return hex.replace(/^(00)+(?=.)/, '');
}

export function normaliseFingerprint(value: unknown): string {
  const hex = typeof value === 'string' ? value.trim().toLowerCase().replace(/[:\s]/g, '') : '';
  if (!/^[0-9a-f]{64}$/.test(hex)) throw invalidInput('fingerprintSha256 must be 64 hex digits (SHA-256 of the DER certificate)');
  return hex;
}

const actorOf = (c: Caller) => (c.kind === 'principal' ? c.principal.entityId : c.entityId);
const viaOf = (c: Caller) => (c.kind === 'principal' ? c.via ?? 'graphql' : c.via);
/** The client certificate a principal called with over mutual TLS, named in what it revokes. */
const clientCertificateOf = (c: Caller) => (c.kind === 'principal' && c.clientCertificateId ? { client_certificate_id: c.clientCertificateId } : {});

/** Told of revocations: written inside a transaction (pending), and committed (before the call returns). */
export interface RevocationWatcher {
  pending(issuerIds: Iterable<string>): void;
  committed(issuerIds: Iterable<string>): void;
}

export function createRevocation(deps: { sql: Sql; hub: NotifyHub; access: PkiAccess; audit: AuditWriter; published?: RevocationWatcher }) {
  const { sql, hub, access } = deps;
  // This instance's caches of certificate answers (gRPC resolution): told after commit, before the call that
  // revoked returns, so the revoking instance never answers from a stale entry. Other instances hear the NOTIFY.
  const revokedHere = new Set<(notice: RevokedNotice) => void>();
  function announce(entries: rq.LedgerEntry[]): void {
    if (entries.length === 0) return;
    const notice = revokedPayload(entries);
    for (const handler of revokedHere) handler(notice);
  }
  /** After a revoking transaction committed: publication caches serve again, resolution caches forget. */
  function committed(entries: rq.LedgerEntry[]): void {
    if (entries.length === 0) return;
    deps.published?.committed(entries.map((e) => e.issuerId));
    announce(entries);
  }

  /** Writes ledger entries, credentials, audit events and outbox records for `rows` inside `tx`. */
  async function revokeRows(tx: Queryable, rows: rq.RevocableRow[], reason: RevocationReason, actor: string | null, meta: { requestId?: string | null; via: string; details?: Record<string, unknown> }) {
    if (rows.length === 0) return [];
    const at = revocationInstant();
    const entries = rows.map((r) => ledgerEntryFor(r, reason, actor, at));
    await rq.insertLedger(tx, entries);
    await rq.markRevoked(tx, entries);
    await insertAuditEvents(tx, entries.map((e) => revocationAudit(e, meta)));
    await cq.insertOutbox(tx, entries.map((e) => revocationOutbox(e, meta.details)));
    await hub.notify(REVOKED_TOPIC, revokedPayload(entries), tx);
    // Cached CRLs and OCSP answers of these issuers stop serving now; after commit they are dropped again
    // (committed below, or the NOTIFY for cascades that commit in their caller's transaction).
    deps.published?.pending(entries.map((e) => e.issuerId));
    return entries;
  }

  /** Every active leaf `issuerId` signed, as ca_compromise, a batch at a time (its authority is revoked). */
  async function revokeLeavesOf(tx: Queryable, issuerId: string, actor: string | null, requestId: string | null): Promise<rq.LedgerEntry[]> {
    const entries: rq.LedgerEntry[] = [];
    const meta = { requestId, via: 'authority.revoke', details: { scope: 'authority', authority_id: issuerId } };
    for (let after = ZERO_UUID; ;) {
      const rows = await rq.lockActiveOfIssuer(tx, issuerId, after, 1000);
      entries.push(...(await revokeRows(tx, rows, 'ca_compromise', actor, meta)));
      if (rows.length < 1000) return entries;
      after = (rows[rows.length - 1] as rq.RevocableRow).id;
    }
  }

  async function find(caller: Caller, input: RevokeInput): Promise<cq.CertificateRow> {
    const given = [input.credentialId, input.fingerprintSha256, input.issuerId ?? input.serialNumber].filter((x) => x !== undefined && x !== null);
    if (given.length !== 1) throw invalidInput('give exactly one of credentialId, fingerprintSha256, or issuerId with serialNumber');
    let row: cq.CertificateRow | undefined;
    if (input.credentialId !== undefined && input.credentialId !== null) row = await cq.selectCertificate(sql, v.uuid('credentialId', input.credentialId));
    else if (input.fingerprintSha256 !== undefined && input.fingerprintSha256 !== null) row = await cq.selectByFingerprint(sql, normaliseFingerprint(input.fingerprintSha256));
    else {
      if (input.issuerId === undefined || input.issuerId === null || input.serialNumber === undefined || input.serialNumber === null) {
        throw invalidInput('issuerId and serialNumber go together');
      }
      row = await cq.selectByIssuerSerial(sql, v.uuid('issuerId', input.issuerId), normaliseSerial(input.serialNumber));
    }
    if (!row) throw await missingTo(access, caller, 'certificate');
    return row;
  }

  async function entityOf(entityId: string) {
    const [row] = await sql<SubjectEntity[]>`
      select id, kind, name, tenant_id, status, deleted_at is not null as deleted from entities where id = ${entityId}`;
    return row;
  }

  async function mayRevoke(caller: Caller, entityId: string, credentialId: string): Promise<boolean> {
    if (caller.kind === 'subject') return caller.entityId === entityId;
    const entity = await entityOf(entityId);
    return !!entity && (await access.mayRevoke(caller.principal, entity, credentialId));
  }

  /** Tenant (or platform, for null) scope of a bulk revocation, after checking the caller manages credentials there. */
  async function bulkScope(p: Principal, input: BulkInput): Promise<{ scope: rq.BulkScope; tenantId: string | null; perItem: boolean }> {
    const chosen = (['tenantId', 'issuerId', 'principalGroupId'] as const).filter((k) => input[k] !== undefined && input[k] !== null);
    if (chosen.length !== 1) throw invalidInput('give exactly one scope: tenantId, issuerId or principalGroupId');
    const key = chosen[0] as 'tenantId' | 'issuerId' | 'principalGroupId';
    const id = v.uuid(key, input[key]);
    let tenantId: string | null;
    if (key === 'tenantId') tenantId = id;
    else if (key === 'issuerId') {
      const authority = await selectAuthority(sql, id);
      if (!authority) throw await access.missingCertificate(p, 'authority');
      tenantId = authority.tenant_id;
    } else {
      const [group] = await sql<{ tenant_id: string | null; group_type: string }[]>`select tenant_id, group_type from groups where id = ${id}`;
      if (!group) throw await access.missingCertificate(p, 'principal group');
      tenantId = group.tenant_id;
      // The type is told only to a caller managing credentials where the group lives.
      await access.requireScopeManage(p, tenantId);
      if (group.group_type !== 'principal') throw notFound('principal group');
    }
    await access.requireScopeManage(p, tenantId);
    const scope: rq.BulkScope = key === 'tenantId' ? { tenantId: id } : key === 'issuerId' ? { issuerId: id } : { principalGroupId: id };
    // Members of a principal group may be entities the caller does not manage (global humans): each is checked.
    return { scope, tenantId, perItem: key === 'principalGroupId' };
  }

  return {
    /** Hears this instance's revocations (after commit; cascades inside a caller's transaction before it). */
    onRevoked(handler: (notice: RevokedNotice) => void): () => void {
      revokedHere.add(handler);
      return () => revokedHere.delete(handler);
    },

    async revoke(caller: Caller, input: RevokeInput): Promise<Revocation> {
      const reason = revocationReason(input.reason);
      const found = await find(caller, input);
      if (!(await mayRevoke(caller, found.entity_id, found.id))) throw forbidden();
      const actor = actorOf(caller);
      const outcome = await sql.begin(async (tx) => {
        const row = (await cq.selectCertificateForUpdate(tx, found.id)) as cq.CertificateRow;
        if (row.status === 'revoked') return { row, entry: null };
        const revocable = { ...row, fingerprint_sha256: row.metadata.fingerprint_sha256 ?? null };
        const [entry] = await revokeRows(tx, [revocable], reason, actor, { requestId: caller.requestId, via: viaOf(caller) });
        return { row, entry };
      });
      if (outcome.entry) committed([outcome.entry]);
      if (outcome.entry) {
        const certificate = { ...outcome.row, status: 'revoked' as const, revoked_at: new Date(outcome.entry.revokedAt), revocation_reason: reason };
        return { certificate, reason, actorEntityId: actor, revokedAt: new Date(outcome.entry.revokedAt), idempotentReplay: false };
      }
      // Already revoked: the ledger says when, why and by whom.
      const ledger = await rq.selectLedgerEntry(sql, outcome.row.issuer_id, outcome.row.identifier);
      return {
        certificate: outcome.row, reason: (ledger?.reason ?? outcome.row.revocation_reason ?? 'unspecified') as RevocationReason,
        actorEntityId: ledger?.actor_entity_id ?? null, revokedAt: ledger?.revoked_at ?? (outcome.row.revoked_at as Date), idempotentReplay: true,
      };
    },

    /** Every active certificate of the entity; the number revoked. */
    async revokeEntity(caller: Caller, entityId: unknown, reasonValue: unknown): Promise<number> {
      const reason = revocationReason(reasonValue);
      const id = v.uuid('entityId', entityId);
      const entity = await entityOf(id);
      if (!entity) throw await missingTo(access, caller, 'entity');
      if (caller.kind === 'principal' ? !(await access.mayManage(caller.principal, entity)) : caller.entityId !== id) throw forbidden();
      const entries = await sql.begin(async (tx) => revokeRows(tx, await rq.lockActiveOfEntity(tx, id), reason, actorOf(caller), {
        requestId: caller.requestId, via: viaOf(caller), details: { scope: 'entity', ...clientCertificateOf(caller) },
      }));
      committed(entries);
      return entries.length;
    },

    async bulk(p: Principal, input: BulkInput, requestId: string | null) {
      const reason = revocationReason(input.reason);
      const { scope, perItem } = await bulkScope(p, input);
      let snapshotAt = new Date();
      if (input.snapshotAt !== undefined && input.snapshotAt !== null) {
        snapshotAt = new Date(String(input.snapshotAt));
        if (typeof input.snapshotAt !== 'string' || Number.isNaN(snapshotAt.getTime())) throw invalidInput('snapshotAt must be an RFC 3339 timestamp');
      }
      const after = input.afterCredentialId === undefined || input.afterCredentialId === null ? ZERO_UUID : v.uuid('afterCredentialId', input.afterCredentialId);
      // pageOf reads 0 as 1: here a page revokes, so a limit that asks for none must not revoke one.
      if (input.limit !== undefined && input.limit !== null && !(Number.isInteger(input.limit) && input.limit >= 1)) {
        throw invalidInput(`limit must be a whole number from 1 to 1000 (got ${String(input.limit)})`);
      }
      const page = pageOf({ limit: input.limit }, { defaultLimit: 100, maxLimit: 1000 });
      const rows = await rq.selectBulkPage(sql, scope, snapshotAt, after, page.limit);
      const items = rows.map((r) => ({
        credentialId: r.id, issuerId: r.issuer_id, entityId: r.entity_id, tenantId: r.tenant_id,
        outcome: r.status === 'revoked' ? 'already_revoked' : 'revoked', errorCode: null as string | null,
      }));
      const wanted: string[] = [];
      for (const [i, r] of rows.entries()) {
        if (r.status !== 'active') continue;
        if (perItem && !(await mayRevoke({ kind: 'principal', principal: p }, r.entity_id, r.id))) {
          Object.assign(items[i] as object, { outcome: 'failed', errorCode: 'FORBIDDEN' });
          continue;
        }
        wanted.push(r.id);
      }
      const revoked = new Set<string>();
      const entries: rq.LedgerEntry[] = [];
      if (wanted.length > 0) {
        await sql.begin(async (tx) => {
          const locked = await tx<rq.RevocableRow[]>`
            select c.id, c.entity_id, c.identifier, c.issuer_id, e.tenant_id, c.metadata ->> 'fingerprint_sha256' as fingerprint_sha256, c.expires_at
            from credentials c join entities e on e.id = c.entity_id
            where c.id = any(${wanted}::uuid[]) and c.status = 'active' order by c.id for update of c`;
          entries.push(...(await revokeRows(tx, locked, reason, p.entityId, { requestId, via: 'graphql', details: { scope: 'bulk' } })));
        });
        for (const e of entries) if (e.credentialId) revoked.add(e.credentialId);
        committed(entries);
      }
      for (const item of items) if (item.outcome === 'revoked' && !revoked.has(item.credentialId)) item.outcome = 'already_revoked';
      const complete = rows.length < page.limit;
      return { items, snapshotAt: snapshotAt.toISOString(), nextCursor: complete ? null : (rows[rows.length - 1] as rq.BulkRow).id, complete };
    },

    /** Tenant deletion (inside its transaction): every certificate of the tenant's entities, ledger included. */
    async revokeTenant(tx: Queryable, tenantId: string, actor: string | null, requestId: string | null = null): Promise<number> {
      let after = ZERO_UUID;
      let count = 0;
      for (;;) {
        const rows = await rq.lockActiveOfTenant(tx, tenantId, after, 1000);
        // Inside the caller's transaction: announced before its commit (the NOTIFY follows at commit).
        announce(await revokeRows(tx, rows, 'cessation_of_operation', actor, { requestId, via: 'tenant.delete', details: { scope: 'tenant' } }));
        count += rows.length;
        if (rows.length < 1000) return count;
        after = (rows[rows.length - 1] as rq.RevocableRow).id;
      }
    },

    /**
     * A revoked authority (inside revokeAuthority's transaction): its own certificate's entry in its parent's
     * ledger (the platform intermediate's CRL and OCSP publish it), then every active leaf it signed, revoked
     * as ca_compromise. Pass the result to `committed` once the transaction committed.
     */
    async revokeAuthorityInside(tx: Queryable, authority: AuthorityRevocable, reason: RevocationReason, actor: string | null, requestId: string | null): Promise<rq.LedgerEntry[]> {
      const at = revocationInstant();
      const own: rq.LedgerEntry = {
        issuerId: authority.parent_id, serialNumber: authority.serial_number, credentialId: null, entityId: null, tenantId: authority.tenant_id,
        fingerprintSha256: authority.fingerprint_sha256, reason, revokedAt: at.toISOString(), notAfter: authority.not_after?.toISOString() ?? null,
        actorEntityId: actor, crlEntry: crlEntryDer(authority.serial_number, at, reason).toString('hex'),
      };
      await rq.insertLedger(tx, [own]);
      await hub.notify(REVOKED_TOPIC, revokedPayload([own]), tx);
      deps.published?.pending([own.issuerId]);
      return [own, ...(await revokeLeavesOf(tx, authority.id, actor, requestId))];
    },

    /** Every active leaf of a revoked authority (inside a transaction; `committed` after): also what a replay sweeps. */
    revokeLeavesOf,

    /** After a transaction that revoked inside it committed: publication caches serve again, resolution caches forget. */
    committed,

    /** Entity deletion (inside its transaction). */
    async revokeEntityDeleted(tx: Queryable, entityId: string, actor: string | null, requestId: string | null = null): Promise<number> {
      const rows = await rq.lockActiveOfEntity(tx, entityId);
      announce(await revokeRows(tx, rows, 'cessation_of_operation', actor, { requestId, via: 'entity.delete', details: { scope: 'entity' } }));
      return rows.length;
    },
  };
}

export type RevocationService = ReturnType<typeof createRevocation>;
