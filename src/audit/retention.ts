// Audit retention (SVC_AUDIT_RETENTION_*, off by default): entries older than the retention are deleted in
// batches, each batch its own short transaction under an advisory lock (one batch at a time across
// instances), and each pass is recorded as the audit event `audit.retention_cleanup` {deleted_rows, cutoff,
// retention_days, batch_size}. The health report shows the settings and the latest pass.
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import * as q from './queries.js';

export interface AuditRetentionSettings {
  enabled: boolean;
  days: number;
  cleanupIntervalSecs: number;
  cleanupBatchSize: number;
}

export interface RetentionResult {
  deletedRows: number;
  cutoff: Date;
}

/** What GET /health's details (GraphQL systemStatus.auditRetention) show, snake_case as the report. */
export interface RetentionStatus {
  enabled: boolean;
  days: number;
  cleanup_interval_secs: number;
  cleanup_batch_size: number;
  /** The latest pass's event details plus ran_at; null before the first pass (or when unreadable). */
  last_cleanup: Record<string, unknown> | null;
}

export interface AuditRetention {
  /** One pass; null when skipped (another instance made one within half an interval, or the lock was busy). */
  run(now?: Date): Promise<RetentionResult | null>;
  status(): Promise<RetentionStatus>;
  /** Schedules a pass now and then every interval (when enabled). */
  start(): void;
  close(): Promise<void>;
}

const DAY_MS = 86_400_000;
/** A health report must not hang on a busy database: past this, last_cleanup reads null. */
const STATUS_TIMEOUT_MS = 2000;

export function createAuditRetention(sql: Sql, settings: AuditRetentionSettings, log: Logger): AuditRetention {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<RetentionResult | null> | undefined;
  let closing = false;

  async function pass(now: Date): Promise<RetentionResult | null> {
    // Every instance runs the timer; a pass made by any of them within half an interval counts for all.
    const last = await q.selectLastRetentionPass(sql);
    if (last && now.getTime() - last.created_at.getTime() < (settings.cleanupIntervalSecs * 1000) / 2) return null;
    const cutoff = new Date(now.getTime() - settings.days * DAY_MS);
    let deletedRows = 0;
    for (;;) {
      const n = await sql.begin(async (tx) => ((await q.tryRetentionLock(tx)) ? q.deleteExpiredBatch(tx, cutoff, settings.cleanupBatchSize) : null));
      if (n === null) {
        if (deletedRows === 0) return null;
        break;
      }
      deletedRows += n;
      if (n < settings.cleanupBatchSize || closing) break;
    }
    await q.insertAuditEvents(sql, [{
      event: q.RETENTION_EVENT, outcome: 'allow', at: now,
      details: { deleted_rows: deletedRows, cutoff: cutoff.toISOString(), retention_days: settings.days, batch_size: settings.cleanupBatchSize },
    }]);
    if (deletedRows > 0) log.info('audit entries past their retention deleted', { rows: deletedRows, cutoff: cutoff.toISOString() });
    return { deletedRows, cutoff };
  }

  function run(now = new Date()): Promise<RetentionResult | null> {
    // One pass at a time in this process; the lock keeps the other instances' batches apart.
    return (running ??= pass(now).finally(() => {
      running = undefined;
    }));
  }

  async function lastCleanup(): Promise<Record<string, unknown> | null> {
    let t: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      t = setTimeout(() => resolve(undefined), STATUS_TIMEOUT_MS);
    });
    try {
      const last = await Promise.race([q.selectLastRetentionPass(sql), timeout]);
      return last ? { ...last.details, ran_at: last.created_at.toISOString() } : null;
    } catch {
      return null;
    } finally {
      clearTimeout(t);
    }
  }

  return {
    run,
    async status() {
      return {
        enabled: settings.enabled, days: settings.days, cleanup_interval_secs: settings.cleanupIntervalSecs,
        cleanup_batch_size: settings.cleanupBatchSize, last_cleanup: await lastCleanup(),
      };
    },
    start() {
      if (!settings.enabled) return;
      const tick = () => {
        if (closing) return;
        run().catch((err: unknown) => log.warn('audit retention pass failed', { err: String(err) }));
      };
      setImmediate(tick);
      timer = setInterval(tick, settings.cleanupIntervalSecs * 1000);
      timer.unref();
    },
    async close() {
      closing = true;
      if (timer) clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
