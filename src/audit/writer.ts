// The non-blocking audit writer: record() never waits and never throws; the batching, retry and
// isolation of refused events are the shared batch writer's (db/batch-writer.ts).
import type { Sql } from '../db/client.js';
import { createBatchWriter, type BatchWriterOptions } from '../db/batch-writer.js';
import { jsonBytes, jsonNesting } from '../json-size.js';
import type { Logger } from '../log.js';
import type { JsonBounds } from '../validate.js';
import { insertAuditEvents, type AuditEvent } from './queries.js';

export interface AuditWriter {
  record(event: AuditEvent): void;
  /** Writes everything queued so far (tests and shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: { queued: number; written: number; dropped: number; failures: number };
}

export interface AuditWriterOptions extends BatchWriterOptions {
  /** Bounds of one event's details (the stored-document bounds): larger details are stored as a note of their keys. */
  details?: JsonBounds;
}

/**
 * Details are built by the service, mostly from bounded input; one that still passes the document bounds
 * (a caller's long filter text quoted in it) is kept as its top-level keys, so the event is recorded
 * without storing an unbounded document.
 */
function boundedDetails(details: Record<string, unknown>, bounds: JsonBounds): Record<string, unknown> {
  if (jsonNesting(details, bounds.maxDepth) <= bounds.maxDepth && jsonBytes(details, bounds.maxBytes) <= bounds.maxBytes) return details;
  return { truncated: true, max_bytes: bounds.maxBytes, max_depth: bounds.maxDepth, keys: Object.keys(details).slice(0, 32).map((k) => k.slice(0, 64)) };
}

export function createAuditWriter(sql: Sql, options: AuditWriterOptions, log: Logger): AuditWriter {
  const writer = createBatchWriter<AuditEvent>({
    what: 'audit',
    insert: (batch) => insertAuditEvents(sql, batch),
    describe: (e) => ({ event: e.event }),
  }, options, log);
  return {
    // Stamped when it happened, not when its batch is written.
    record(event) {
      const details = options.details && event.details ? boundedDetails(event.details, options.details) : event.details;
      writer.record(event.at && details === event.details ? event : { ...event, details, at: event.at ?? new Date() });
    },
    flush: () => writer.flush(),
    close: () => writer.close(),
    get stats() {
      return writer.stats;
    },
  };
}
