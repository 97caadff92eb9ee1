// Batched, non-blocking writes of records nobody waits for (audit events, custom-endpoint execution logs):
// record() never waits and never throws; batches are written in the background, failures are logged and
// retried while the bounded queue has room, and a record the database refuses for its own values is
// dropped alone instead of blocking the queue.
import { isDataError } from '../errors.js';
import type { Logger } from '../log.js';

export interface BatchWriter<T> {
  record(item: T): void;
  /** Writes everything queued so far (tests and shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: { queued: number; written: number; dropped: number; failures: number };
}

export interface BatchWriterOptions {
  batchSize: number;
  flushIntervalMs: number;
  maxQueue: number;
}

export interface BatchSink<T> {
  /** What the records are, for log lines ('audit', 'custom endpoint execution log'). */
  what: string;
  /** One statement for the whole batch. */
  insert(batch: T[]): Promise<void>;
  /** A short description of one record for the line that reports it dropped. */
  describe?(item: T): Record<string, unknown>;
}

export function createBatchWriter<T>(sink: BatchSink<T>, options: BatchWriterOptions, log: Logger): BatchWriter<T> {
  let queue: T[] = [];
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

  /**
   * Writes a batch; resolves with what is left unwritten because the database failed (empty when done).
   * A record the database refuses for its own values (a data error, which would fail on every retry)
   * must not hold back the queue: the batch is written one record at a time and only the refused one is
   * dropped, logged and counted.
   */
  async function write(batch: T[]): Promise<{ left: T[]; err?: unknown }> {
    try {
      await sink.insert(batch);
      stats.written += batch.length;
      return { left: [] };
    } catch (err) {
      if (!isDataError(err)) return { left: batch, err };
      if (batch.length === 1) {
        stats.dropped++;
        log.error(`${sink.what} record refused by the database; dropped`, { err, ...sink.describe?.(batch[0] as T) });
        return { left: [] };
      }
      for (let i = 0; i < batch.length; i++) {
        const one = await write([batch[i] as T]);
        if (one.left.length > 0) return { left: batch.slice(i), err: one.err };
      }
      return { left: [] };
    }
  }

  async function writeBatch(): Promise<void> {
    if (writing || queue.length === 0) return writing;
    const batch = queue.slice(0, options.batchSize);
    queue = queue.slice(batch.length);
    writing = write(batch).then(({ left, err }) => {
      if (left.length === 0) {
        consecutiveFailures = 0;
        return;
      }
      stats.failures++;
      consecutiveFailures++;
      // Put what is left back in front so order is kept; what no longer fits is dropped, and counted.
      const room = Math.max(0, options.maxQueue - queue.length);
      const kept = left.slice(0, room);
      stats.dropped += left.length - kept.length;
      queue = kept.concat(queue);
      log.error(`${sink.what} write failed; will retry`, { err, batch: left.length, dropped: left.length - kept.length });
    });
    try {
      await writing;
    } finally {
      writing = undefined;
      stats.queued = queue.length;
      if (queue.length > 0 && !closed) schedule();
    }
  }

  return {
    record(item) {
      if (closed) return;
      if (queue.length >= options.maxQueue) {
        stats.dropped++;
        if (stats.dropped % 1000 === 1) log.warn(`${sink.what} queue full; dropping records`, { dropped: stats.dropped });
        return;
      }
      queue.push(item);
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
