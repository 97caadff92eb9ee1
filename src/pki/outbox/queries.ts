// SQL of the outbox relay: the relay lock, pending records in delivery order, their delivery state, pruning.
import type { Queryable } from '../../db/client.js';

const RELAY_LOCK = 'pki:outbox-relay';

export interface OutboxRow {
  id: string;
  seq: string;
  event: string;
  tenant_id: string | null;
  payload: Record<string, unknown>;
  created_at: Date;
  attempts: number;
  next_attempt_at: Date | null;
}

/**
 * One relay across instances: the session holding this lock delivers; the others skip the tick. A session
 * lock on the relay's own connection, not a transaction's: a pass waits on webhooks, and a transaction open
 * that long would pin a snapshot (vacuum stalls) and run into idle-in-transaction limits. PostgreSQL
 * releases it when that connection ends, so another instance takes over by itself.
 */
export async function tryRelayLock(conn: Queryable): Promise<boolean> {
  const [row] = await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(hashtextextended(${RELAY_LOCK}, 0)) as ok`;
  return row?.ok === true;
}

export async function releaseRelayLock(conn: Queryable): Promise<void> {
  await conn`select pg_advisory_unlock(hashtextextended(${RELAY_LOCK}, 0))`;
}

export function selectPending(sql: Queryable, limit: number): Promise<OutboxRow[]> {
  return sql<OutboxRow[]>`
    select id, seq::text as seq, event, tenant_id, payload, created_at, attempts, next_attempt_at
    from event_outbox where delivered_at is null order by seq limit ${limit}`;
}

export async function markDelivered(sql: Queryable, id: string): Promise<void> {
  await sql`update event_outbox set delivered_at = now(), attempts = attempts + 1, last_error = null where id = ${id}`;
}

/** Marked and announced in one statement: the NOTIFY goes out exactly when the mark commits. */
export async function markDeliveredAndNotify(sql: Queryable, id: string, channel: string, body: string): Promise<void> {
  await sql`
    with marked as (
      update event_outbox set delivered_at = now(), attempts = attempts + 1, last_error = null where id = ${id} returning id)
    select pg_notify(${channel}, ${body}) from marked`;
}

export async function markFailed(sql: Queryable, id: string, retryInMs: number, error: string): Promise<void> {
  await sql`
    update event_outbox set attempts = attempts + 1, last_error = ${error.slice(0, 1000)},
      next_attempt_at = now() + make_interval(secs => ${retryInMs / 1000})
    where id = ${id}`;
}

/** Delivered records older than the retention, a bounded number per tick. */
export async function pruneDelivered(sql: Queryable, retentionSecs: number, limit: number): Promise<number> {
  const rows = await sql`
    delete from event_outbox where id in (
      select id from event_outbox where delivered_at is not null and delivered_at < now() - make_interval(secs => ${retentionSecs})
      order by delivered_at limit ${limit})
    returning id`;
  return rows.length;
}
