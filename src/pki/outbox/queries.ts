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

/** One relay across instances: the transaction holding this lock delivers; the others skip the tick. */
export async function tryRelayLock(tx: Queryable): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(hashtextextended(${RELAY_LOCK}, 0)) as ok`;
  return row?.ok === true;
}

export function selectPending(tx: Queryable, limit: number): Promise<OutboxRow[]> {
  return tx<OutboxRow[]>`
    select id, seq::text as seq, event, tenant_id, payload, created_at, attempts, next_attempt_at
    from event_outbox where delivered_at is null order by seq limit ${limit}`;
}

export async function markDelivered(tx: Queryable, id: string): Promise<void> {
  await tx`update event_outbox set delivered_at = now(), attempts = attempts + 1, last_error = null where id = ${id}`;
}

export async function markFailed(tx: Queryable, id: string, retryInMs: number, error: string): Promise<void> {
  await tx`
    update event_outbox set attempts = attempts + 1, last_error = ${error.slice(0, 1000)},
      next_attempt_at = now() + make_interval(secs => ${retryInMs / 1000})
    where id = ${id}`;
}

/** Delivered records older than the retention, a bounded number per tick. */
export async function pruneDelivered(tx: Queryable, retentionSecs: number, limit: number): Promise<number> {
  const rows = await tx`
    delete from event_outbox where id in (
      select id from event_outbox where delivered_at is not null and delivered_at < now() - make_interval(secs => ${retentionSecs})
      order by delivered_at limit ${limit})
    returning id`;
  return rows.length;
}

export async function notifyChannel(tx: Queryable, channel: string, body: string): Promise<void> {
  await tx`select pg_notify(${channel}, ${body})`;
}
