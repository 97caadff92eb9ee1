// The outbox relay: delivers event_outbox records (issuance, renewal, revocation, expiry notices) in their
// insert order to the configured sinks, one relay across instances (a session advisory lock held for the
// pass on a connection of the relay's own; each record's outcome is written through the pool as it happens,
// so no transaction stays open across a webhook call). Sinks: a webhook (JSON POST signed with HMAC-SHA256; the record id is the stable event id,
// so a receiver drops the duplicates at-least-once delivery may bring) and a PostgreSQL NOTIFY channel.
// A failing record blocks the ones after it and is retried with exponential backoff: order is kept.
// Delivered records are pruned after the retention period.
//
// The lock's connection is a one-connection pool rather than a reserved pool connection: postgres.js 3.4.9
// throws an uncaught exception from a reserved connection whose backend died (porsager/postgres#1208),
// while a pool replaces a dead connection by itself. Should that connection end mid-pass, the pass stops
// before the next record (the lock went with it); the record being delivered may then reach the receiver
// twice, with the same event id.
import { createHmac } from 'node:crypto';
import postgres from 'postgres';
import { reconnectDelaySecs, type Sql } from '../../db/client.js';
import type { Logger } from '../../log.js';
import * as q from './queries.js';

export interface OutboxSettings {
  webhookUrl?: string | undefined;
  webhookSecret?: string | undefined;
  webhookTimeoutMs: number;
  notifyChannel?: string | undefined;
  pollIntervalMs: number;
  batchSize: number;
  retryBaseMs: number;
  retryMaxMs: number;
  retentionSecs: number;
}

export const SIGNATURE_HEADER = 'x-svc-signature';
export const TIMESTAMP_HEADER = 'x-svc-timestamp';
export const EVENT_ID_HEADER = 'x-svc-event-id';

/** The JSON a sink receives: the record as stored, with its id as the stable event id. */
export function eventBody(row: q.OutboxRow): string {
  return JSON.stringify({
    id: row.id, seq: Number(row.seq), event: row.event, tenant_id: row.tenant_id, created_at: row.created_at.toISOString(), payload: row.payload,
  });
}

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`: the receiver recomputes it to trust the body and time. */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface RelayTick {
  ran: boolean;
  delivered: number;
  failed: number;
  pruned: number;
}

export function createOutboxRelay(deps: { url: string; sql: Sql; log: Logger; settings: OutboxSettings; applicationName?: string }) {
  const { sql, log, settings: s } = deps;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let lockHeld = false;
  // No idle timeout or lifetime: the connection sits idle while a webhook answers, and closing it then
  // would hand the lock away mid-pass.
  const lockSql = postgres(deps.url, {
    max: 1,
    idle_timeout: undefined,
    max_lifetime: null,
    backoff: reconnectDelaySecs,
    connection: { application_name: deps.applicationName ?? 'svc-outbox-relay' },
    onnotice: () => undefined,
    onclose: () => { lockHeld = false; },
  } as postgres.Options<Record<string, never>>) as unknown as Sql;

  async function postWebhook(row: q.OutboxRow, body: string): Promise<void> {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const res = await fetch(s.webhookUrl!, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        [EVENT_ID_HEADER]: row.id,
        'x-svc-event': row.event,
        [TIMESTAMP_HEADER]: timestamp,
        [SIGNATURE_HEADER]: webhookSignature(s.webhookSecret!, timestamp, body),
      },
      body,
      signal: AbortSignal.timeout(s.webhookTimeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status < 200 || res.status >= 300) throw new Error(`webhook answered ${res.status}`);
  }

  const backoff = (attempts: number) => Math.min(s.retryMaxMs, s.retryBaseMs * 2 ** Math.min(attempts, 30));

  async function deliver(row: q.OutboxRow): Promise<void> {
    const body = eventBody(row);
    if (s.webhookUrl) await postWebhook(row, body);
    if (!s.notifyChannel) return q.markDelivered(sql, row.id);
    // NOTIFY payloads stop at 8000 bytes: a bigger record is announced by reference.
    const note = body.length < 7900 ? body : JSON.stringify({ id: row.id, seq: Number(row.seq), event: row.event, truncated: true });
    return q.markDeliveredAndNotify(sql, row.id, s.notifyChannel, note);
  }

  async function pass(): Promise<Omit<RelayTick, 'ran'>> {
    let delivered = 0;
    let failed = 0;
    for (const row of await q.selectPending(sql, s.batchSize)) {
      // In order: a record waiting for its retry holds back the ones after it.
      if (row.next_attempt_at && row.next_attempt_at.getTime() > Date.now()) break;
      if (!lockHeld) {
        log.warn('outbox relay lost its lock connection; another instance goes on', { next: row.id });
        break;
      }
      try {
        await deliver(row);
        delivered++;
      } catch (err) {
        const message = err instanceof Error ? (err.name === 'TimeoutError' ? 'webhook timed out' : err.message) : String(err);
        await q.markFailed(sql, row.id, backoff(row.attempts), message);
        log.warn('outbox delivery failed; retried with backoff', { id: row.id, event: row.event, attempts: row.attempts + 1, err: message });
        failed++;
        break;
      }
    }
    return { delivered, failed, pruned: await q.pruneDelivered(sql, s.retentionSecs, 1000) };
  }

  async function tick(): Promise<RelayTick> {
    if (!(await q.tryRelayLock(lockSql))) return { ran: false, delivered: 0, failed: 0, pruned: 0 };
    lockHeld = true;
    try {
      return { ran: true, ...(await pass()) };
    } finally {
      // After a lost connection there is nothing to release (a new session would only fail to unlock).
      if (lockHeld) await q.releaseRelayLock(lockSql);
      lockHeld = false;
    }
  }

  function schedule(): void {
    if (running) return;
    running = tick()
      .catch((err: unknown) => log.warn('outbox relay tick failed', { err: String(err) }))
      .finally(() => { running = undefined; });
  }

  return {
    /** One delivery pass (tests drive it directly). */
    tick,
    start(): void {
      schedule();
      timer = setInterval(schedule, s.pollIntervalMs);
      timer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = undefined;
      await running;
      await lockSql.end({ timeout: 5 });
    },
  };
}

export type OutboxRelay = ReturnType<typeof createOutboxRelay>;
