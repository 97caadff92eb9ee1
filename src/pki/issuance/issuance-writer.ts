// Commits issuances and renewals: each one's credential, idempotency record, renewal link, the revocation
// of the certificate it replaces (revokeOld), its audit event and its outbox record, atomically, in one
// statement shared by every issuance gathered into the same batch (a WITH clause per table).
import { auditInsert, type AuditEvent } from '../../audit/index.js';
import type { Sql } from '../../db/client.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import { createBatcher } from './batcher.js';
import * as cq from './certificate-queries.js';
import { REVOKED_TOPIC, revokedPayload } from '../revocation/revocation-events.js';
import { ledgerInsert, revokedUpdate, type LedgerEntry } from '../revocation/revocation-queries.js';

export interface IssuanceWrite {
  credential: cq.NewCertificate;
  request: cq.IssuanceRecord | null;
  renewalOf: string | null;
  revokeOld: LedgerEntry | null;
  audit: AuditEvent[];
  outbox: cq.OutboxRecord[];
}

export function createIssuanceWriter(deps: { sql: Sql; hub: NotifyHub; maxBatch?: number; concurrency?: number }) {
  const { sql, hub } = deps;

  async function write(items: IssuanceWrite[]): Promise<true[]> {
    const revocations = items.flatMap((i) => (i.revokeOld ? [i.revokeOld] : []));
    const rows: cq.IssuanceRows = {
      certificates: items.map((i) => i.credential),
      records: items.flatMap((i) => (i.request ? [{ ...i.request, credentialId: i.credential.id }] : [])),
      renewals: items.flatMap((i) => (i.renewalOf ? [{ previous: i.renewalOf, replacement: i.credential.id }] : [])),
      outbox: items.flatMap((i) => i.outbox),
    };
    const events = items.flatMap((i) => i.audit);
    if (revocations.length === 0) {
      // The common case: one statement, its own transaction, one round trip.
      await cq.writeIssuances(sql, rows, [auditInsert(sql, events)]);
    } else {
      // A renewal revoking what it replaces also NOTIFYs, which must go out at that same commit.
      await sql.begin(async (tx) => {
        await cq.writeIssuances(tx, rows, [auditInsert(tx, events), ledgerInsert(tx, revocations), revokedUpdate(tx, revocations)]);
        await hub.notify(REVOKED_TOPIC, revokedPayload(revocations), tx);
      });
    }
    return items.map(() => true as const);
  }

  return createBatcher<IssuanceWrite, true>({ maxBatch: deps.maxBatch ?? 256, concurrency: deps.concurrency ?? 4, run: write });
}

export type IssuanceWriter = ReturnType<typeof createIssuanceWriter>;
