// Batched, non-blocking audit writer: record() never waits and never throws; batches are written in the
// background, failures are logged and retried while the bounded queue has room.
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import { insertAuditEvents, type AuditEvent } from './queries.js';

export interface AuditWriter {
  record(event: AuditEvent): void;
  /** Writes everything queued so far (tests and shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: { queued: number; written: number; dropped: number; failures: number };
}

export interface AuditWriterOptions {
  batchSize: number;
  flushIntervalMs: number;
  maxQueue: number;
}

export function createAuditWriter(sql: Sql, options: AuditWriterOptions, log: Logger): AuditWriter {
  let queue: AuditEvent[] = [];
  let writing: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let consecutiveFailures = 0;
  const stats = { queued: 0, written: 0, dropped: 0, failures: 0 };

  function schedule(): void {
    if (timer || writing || closed) return;
    // Back off while the database refuses writes instead of hammering it.
    const delay = consecutiveFailures > 0
      ? Math.min(5000, options.flushIntervalMs * 2 ** Math.min(consecutiveFailures, 8))
      : queue.length >= options.batchSize ? 0 : options.flushIntervalMs;
    timer = setTimeout(() => {
      timer = undefined;
      void writeBatch();
    }, delay);
    timer.unref();
  }

  async function writeBatch(): Promise<void> {
    if (writing || queue.length === 0) return writing;
    const batch = queue.slice(0, options.batchSize);
    queue = queue.slice(batch.length);
    writing = insertAuditEvents(sql, batch).then(
      () => {
        stats.written += batch.length;
        consecutiveFailures = 0;
      },
      (err: unknown) => {
        stats.failures++;
        consecutiveFailures++;
        // Put the batch back in front so order is kept; what no longer fits is dropped, and counted.
        const room = Math.max(0, options.maxQueue - queue.length);
        const kept = batch.slice(0, room);
        stats.dropped += batch.length - kept.length;
        queue = kept.concat(queue);
        log.error('audit write failed; will retry', { err, batch: batch.length, dropped: batch.length - kept.length });
      },
    );
    try {
      await writing;
    } finally {
      writing = undefined;
      stats.queued = queue.length;
      if (queue.length > 0 && !closed) schedule();
    }
  }

  return {
    record(event) {
      if (closed) return;
      if (queue.length >= options.maxQueue) {
        stats.dropped++;
        if (stats.dropped % 1000 === 1) log.warn('audit queue full; dropping events', { dropped: stats.dropped });
        return;
      }
      queue.push(event.at ? event : { ...event, at: new Date() });
      stats.queued = queue.length;
      schedule();
    },
    async flush() {
      if (timer) {
        clearTimeout(timer);
        timer = undefined;
      }
      if (writing) await writing.catch(() => undefined);
      let attempts = 0;
      while (queue.length > 0 && attempts < 3) {
        const before = stats.failures;
        await writeBatch();
        if (stats.failures > before) attempts++;
      }
    },
    async close() {
      await this.flush();
      closed = true;
      if (timer) clearTimeout(timer);
    },
    get stats() {
      return { ...stats };
    },
  };
}
