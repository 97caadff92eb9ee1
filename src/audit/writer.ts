// The non-blocking audit writer: record() never waits and never throws; the batching, retry and
// isolation of refused events are the shared batch writer's (db/batch-writer.ts).
import type { Sql } from '../db/client.js';
import { createBatchWriter, type BatchWriterOptions } from '../db/batch-writer.js';
import type { Logger } from '../log.js';
import { insertAuditEvents, type AuditEvent } from './queries.js';

export interface AuditWriter {
  record(event: AuditEvent): void;
  /** Writes everything queued so far (tests and shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: { queued: number; written: number; dropped: number; failures: number };
}

export type AuditWriterOptions = BatchWriterOptions;

export function createAuditWriter(sql: Sql, options: AuditWriterOptions, log: Logger): AuditWriter {
  const writer = createBatchWriter<AuditEvent>({
    what: 'audit',
    insert: (batch) => insertAuditEvents(sql, batch),
    describe: (e) => ({ event: e.event }),
  }, options, log);
  return {
    // Stamped when it happened, not when its batch is written.
    record: (event) => writer.record(event.at ? event : { ...event, at: new Date() }),
    flush: () => writer.flush(),
    close: () => writer.close(),
    get stats() {
      return writer.stats;
    },
  };
}
