// SQL of revocation publication: the stored CRL of each issuer (certificate_crl_state), the ledger position
// and entries a CRL is built from, and the status of one serial as OCSP answers it.
import type { Queryable } from '../../db/client.js';
import type { RevocationReason } from '../x509/der.js';

export interface CrlStateRow {
  issuer_id: string;
  /** bigint as text */
  crl_number: string;
  this_update: Date;
  next_update: Date;
  ledger_mark: string;
  entry_count: number;
  signature: Buffer;
}

export async function selectCrlState(sql: Queryable, issuerId: string): Promise<CrlStateRow | undefined> {
  const [row] = await sql<CrlStateRow[]>`
    select issuer_id, crl_number::text, this_update, next_update, ledger_mark::text, entry_count, signature
    from certificate_crl_state where issuer_id = ${issuerId}`;
  return row;
}

/**
 * The issuer's ledger position: highest id ('0' when it revoked nothing) and count. A CRL made at the same
 * position is current (the ledger is append-only; the count catches an entry with a lower id committing late).
 */
export async function selectLedgerMark(sql: Queryable, issuerId: string): Promise<{ mark: string; count: number }> {
  const [row] = await sql<{ mark: string; count: number }[]>`
    select coalesce(max(id), 0)::text as mark, count(*)::int as count from certificate_revocations where issuer_id = ${issuerId}`;
  return row as { mark: string; count: number };
}

/** Serialises CRL generation of one issuer across instances for the rest of the transaction. */
export async function lockIssuerCrl(sql: Queryable, issuerId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`crl:${issuerId}`}, 0))`;
}

export interface LedgerRead {
  /** The entries after `afterMark`, concatenated in ledger order by PostgreSQL (one value, not a row each). */
  entries: Buffer;
  /** The whole ledger of the issuer: highest id and count. */
  mark: string;
  count: number;
  /** Entries with an id up to `afterMark`: equal to what the caller holds means those are unchanged. */
  countThrough: number;
}

/**
 * The issuer's entries after `afterMark` ('0': all of them) and the ledger position, from one statement
 * (one snapshot): a caller holding the entries up to `afterMark` appends the new ones instead of reading
 * 100,000 again, when `countThrough` says none with a lower id committed late.
 */
export async function selectLedgerSince(sql: Queryable, issuerId: string, afterMark: string): Promise<LedgerRead> {
  const [row] = await sql<{ entries: Buffer | null; count: number; mark: string; count_through: number }[]>`
    select string_agg(crl_entry, ''::bytea order by id) filter (where id > ${afterMark}) as entries, count(*)::int as count,
      coalesce(max(id), 0)::text as mark, (count(*) filter (where id <= ${afterMark}))::int as count_through
    from certificate_revocations where issuer_id = ${issuerId}`;
  return { entries: row?.entries ?? Buffer.alloc(0), count: row?.count ?? 0, mark: row?.mark ?? '0', countThrough: row?.count_through ?? 0 };
}

export async function upsertCrlState(sql: Queryable, s: Omit<CrlStateRow, 'crl_number'> & { crl_number: bigint }): Promise<void> {
  await sql`
    insert into certificate_crl_state (issuer_id, crl_number, this_update, next_update, ledger_mark, entry_count, signature)
    values (${s.issuer_id}, ${s.crl_number.toString()}, ${s.this_update}, ${s.next_update}, ${s.ledger_mark}, ${s.entry_count}, ${s.signature})
    on conflict (issuer_id) do update set crl_number = excluded.crl_number, this_update = excluded.this_update,
      next_update = excluded.next_update, ledger_mark = excluded.ledger_mark, entry_count = excluded.entry_count,
      signature = excluded.signature, updated_at = now()`;
}

export interface SerialStatusRow {
  issued: boolean;
  revoked_at: Date | null;
  reason: RevocationReason | null;
}

/**
 * What OCSP says of a serial of an issuer: revoked when the ledger has it (the ledger outlives purged
 * credentials), good when the issuer issued it, unknown otherwise. One round trip, both by unique index.
 */
export async function selectSerialStatus(sql: Queryable, issuerId: string, serial: string): Promise<SerialStatusRow> {
  const [row] = await sql<SerialStatusRow[]>`
    select (exists (select 1 from credentials c where c.kind = 'certificate' and c.issuer_id = ${issuerId} and c.identifier = ${serial})
        -- an authority the issuer signed (the platform intermediate's tenant intermediates and platform leaf issuer)
        or exists (select 1 from pki_authorities a where a.parent_id = ${issuerId} and a.serial_number = ${serial})) as issued,
      r.revoked_at, r.reason
    from (select 1) one
    left join certificate_revocations r on r.issuer_id = ${issuerId} and r.serial_number = ${serial}`;
  return row as SerialStatusRow;
}
