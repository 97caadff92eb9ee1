// SQL of the audit domain.
import type { Queryable } from '../db/client.js';

export interface AuditEvent {
  event: string;
  outcome: 'allow' | 'deny' | 'error';
  actorEntityId?: string | null;
  /** null or absent: a platform event. */
  tenantId?: string | null;
  targetKind?: string | null;
  targetId?: string | null;
  details?: Record<string, unknown>;
  requestId?: string | null;
  /** Stamped when the event happened, not when the batch was written. */
  at?: Date;
}

interface AuditRow {
  event: string;
  outcome: string;
  actor_entity_id: string | null;
  tenant_id: string | null;
  target_kind: string | null;
  target_id: string | null;
  details: Record<string, unknown>;
  request_id: string | null;
  created_at: string;
}

/**
 * Text as PostgreSQL can keep it: its text and jsonb refuse NUL and a lone UTF-16 surrogate (which a JS
 * string may carry, from a client's input quoted into an event), so those become U+FFFD. An audit record
 * says what happened with a replacement character rather than fail.
 */
function storableText(s: string): string {
  const whole = s.isWellFormed() ? s : s.toWellFormed();
  return whole.includes('\u0000') ? whole.replaceAll('\u0000', '\uFFFD') : whole;
}

function storable(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storable);
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[storableText(k)] = storable(v);
  return out;
}

const storableOrNull = (s: string | null | undefined) => (s === null || s === undefined ? null : storableText(s));

function toRow(e: AuditEvent): AuditRow {
  return {
    event: storableText(e.event),
    outcome: e.outcome,
    actor_entity_id: e.actorEntityId ?? null,
    tenant_id: e.tenantId ?? null,
    target_kind: storableOrNull(e.targetKind),
    target_id: storableOrNull(e.targetId),
    details: e.details ? (storable(e.details) as Record<string, unknown>) : {},
    request_id: storableOrNull(e.requestId),
    created_at: (e.at ?? new Date()).toISOString(),
  };
}

/** One statement for the whole batch; also used inside business transactions that must audit atomically. */
export async function insertAuditEvents(sql: Queryable, events: AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  await auditInsert(sql, events);
}

/**
 * The insert as a query not yet run: awaited it runs alone; placed in another statement (a WITH clause) the
 * audit rows commit in that statement, with the change they record.
 */
export function auditInsert(sql: Queryable, events: AuditEvent[]) {
  const rows = events.map(toRow);
  return sql`
    insert into audit_log (event, outcome, actor_entity_id, tenant_id, target_kind, target_id, details, request_id, created_at)
    select event, outcome, actor_entity_id, tenant_id, target_kind, target_id, details, request_id, created_at
    from jsonb_to_recordset(${sql.json(rows as never)}) as r(
      event text, outcome text, actor_entity_id uuid, tenant_id uuid, target_kind text, target_id text,
      details jsonb, request_id text, created_at timestamptz)`;
}

// ---- retention (audit/retention.ts) ----

/** The event a retention pass records; the health report reads the latest one. */
export const RETENTION_EVENT = 'audit.retention_cleanup';

/** Any constant, the same in every instance: one retention batch at a time across the cluster. */
const RETENTION_LOCK = 'audit:retention';

export async function tryRetentionLock(tx: Queryable): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(hashtextextended(${RETENTION_LOCK}, 0)) as ok`;
  return row?.ok === true;
}

/** The oldest entries before the cutoff, at most `limit` (audit_log__created_at, read from its old end). */
export async function deleteExpiredBatch(tx: Queryable, cutoff: Date, limit: number): Promise<number> {
  const result = await tx`
    delete from audit_log where id in (
      select id from audit_log where created_at < ${cutoff} order by created_at limit ${limit})`;
  return result.count;
}

export interface RetentionPass {
  details: Record<string, unknown>;
  created_at: Date;
}

/** The latest retention pass (audit_log__event_created_at). */
export async function selectLastRetentionPass(sql: Queryable): Promise<RetentionPass | undefined> {
  const [row] = await sql<RetentionPass[]>`
    select details, created_at from audit_log where event = ${RETENTION_EVENT} order by created_at desc limit 1`;
  return row;
}
