// Retention of execution records (SVC_CUSTOM_ENDPOINT_EXECUTION_*): every interval one instance at a time
// (a transaction-scoped advisory lock per batch) deletes, per endpoint, the records older than the age
// and those beyond the newest N, a bounded batch per statement and a bounded number of batches per pass.
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import { deleteExpiredExecutions, tryRetentionLock } from './queries.js';

export interface RetentionSettings {
  days: number;
  maxPerEndpoint: number;
  intervalSecs: number;
  batchSize: number;
}

/** A pass stops after this many full batches; what is left waits for the next interval. */
export const MAX_BATCHES_PER_PASS = 100;

export interface RetentionPass {
  /** False when another instance held the lock. */
  ran: boolean;
  deleted: number;
}

export interface ExecutionRetention {
  /** One pass (one at a time in this process). */
  run(): Promise<RetentionPass>;
  start(): void;
  stop(): Promise<void>;
}

export function createExecutionRetention(deps: { sql: Sql; log: Logger; settings: RetentionSettings }): ExecutionRetention {
  const { sql, log, settings } = deps;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<RetentionPass> | undefined;

  async function pass(): Promise<RetentionPass> {
    let deleted = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
      // A short transaction per batch: the lock is held only while one statement deletes.
      const n = await sql.begin(async (tx) => {
        if (!(await tryRetentionLock(tx))) return -1;
        return deleteExpiredExecutions(tx, settings.days, settings.maxPerEndpoint, settings.batchSize);
      }) as number;
      if (n < 0) return { ran: i > 0, deleted };
      deleted += n;
      if (n < settings.batchSize) break;
    }
    if (deleted > 0) log.info('custom endpoint execution records past retention deleted', { deleted });
    return { ran: true, deleted };
  }

  function run(): Promise<RetentionPass> {
    return (running ??= pass().finally(() => {
      running = undefined;
    }));
  }

  return {
    run,
    start() {
      timer = setInterval(() => {
        run().catch((err: unknown) => log.warn('custom endpoint execution retention failed; retried next interval', { err: String(err) }));
      }, settings.intervalSecs * 1000);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await running?.catch(() => undefined);
    },
  };
}
