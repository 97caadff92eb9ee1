// Daily partitions of the messages table: created ahead, dropped past the retention age. Any instance may
// run the task; a transaction-scoped advisory lock makes one of them do it at a time.
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import * as q from './queries.js';

export interface PartitionSettings {
  /** Days ahead of today (UTC) that get their partition now. */
  aheadDays: number;
  /** Drop partitions whose day ended more than this many days ago; 0 keeps everything. */
  retentionDays: number;
  intervalSecs: number;
}

export interface PartitionMaintenance {
  /** One pass; false when another instance held the lock. */
  run(now?: Date): Promise<boolean>;
  start(): void;
  close(): void;
}

// Any constant; it only has to be the same in every instance of this service.
const LOCK_KEY = 7_346_250;
const DAY_MS = 86_400_000;

function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function partitionName(day: string): string {
  return `messages_p${day.replaceAll('-', '')}`;
}

function dayOfName(name: string): string {
  const d = name.slice('messages_p'.length);
  return `${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}`;
}

const bound = (day: string) => `${day} 00:00:00+00`;

export function createPartitionMaintenance(sql: Sql, settings: PartitionSettings, log: Logger): PartitionMaintenance {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<boolean> | undefined;

  async function pass(now: Date): Promise<boolean> {
    return sql.begin(async (tx) => {
      if (!(await q.tryMaintenanceLock(tx, LOCK_KEY))) return false;
      const existing = new Set(await q.selectPartitions(tx));
      const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
      for (let i = 0; i <= settings.aheadDays; i++) {
        const day = dayOf(today + i * DAY_MS);
        const name = partitionName(day);
        if (existing.has(name)) continue;
        const from = bound(day);
        const to = bound(dayOf(today + (i + 1) * DAY_MS));
        const move = await q.defaultHasRows(tx, from, to);
        await q.createPartition(tx, name, from, to, move);
        log.info('messages partition created', { partition: name, movedFromDefault: move });
      }
      if (settings.retentionDays > 0) {
        const cutoff = dayOf(today - settings.retentionDays * DAY_MS);
        for (const name of existing) {
          const day = dayOfName(name);
          if (day >= cutoff) continue;
          await q.dropPartition(tx, name, day);
          log.info('messages partition dropped (retention)', { partition: name, retentionDays: settings.retentionDays });
        }
        const removed = await q.deleteExpiredDefaultRows(tx, cutoff);
        if (removed > 0) log.info('expired messages removed from the default partition', { rows: removed });
      }
      return true;
    });
  }

  return {
    run(now = new Date()) {
      // One pass at a time in this process; the advisory lock covers the other instances.
      return (running ??= pass(now).finally(() => {
        running = undefined;
      }));
    },
    start() {
      timer = setInterval(() => {
        this.run().catch((err: unknown) => log.warn('messages partition maintenance failed', { err: String(err) }));
      }, settings.intervalSecs * 1000);
      timer.unref();
    },
    close() {
      if (timer) clearInterval(timer);
    },
  };
}
