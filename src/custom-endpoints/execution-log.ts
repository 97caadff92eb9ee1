// The execution log: one record per call of an endpoint (success, error, denied), redacted (by the
// endpoint's secret plan and by key names) and bounded when recorded, written in batches off the request
// path the way the audit writer writes (db/batch-writer.ts).
import { randomUUID } from 'node:crypto';
import { createBatchWriter, type BatchWriter, type BatchWriterOptions } from '../db/batch-writer.js';
import type { Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import { insertExecutions, type NewExecution } from './queries.js';
import { boundedMessage, summaryText } from './redaction.js';
import { redactResponse, redactVariables, type SecretPlan } from './secrets.js';

/** A record keeps at most this many characters of the path it was called with. */
export const PATH_MAX_CHARS = 512;

export interface CallRecord {
  endpointId: string | null;
  callerEntityId: string | null;
  status: NewExecution['status'];
  method: string;
  path: string;
  /** The resolved GraphQL variables; null when the call stopped before they were built. */
  variables: unknown;
  /** The shaped response, or the GraphQL errors of a failed execution. */
  response?: unknown;
  /** The response's JSON text when the caller has it (saves writing it again). */
  responseText?: string;
  error?: string | null;
  /** What of the variables and the response is secret (by the endpoint's operation); absent: key names only. */
  secrets?: SecretPlan;
}

export interface ExecutionLog {
  /** Never waits, never throws. */
  record(call: CallRecord): void;
  flush(): Promise<void>;
  close(): Promise<void>;
  readonly stats: BatchWriter<NewExecution>['stats'];
}

let prefixMs = -1;
let prefix = '';
/** A UUID in the version 7 layout (milliseconds first): records enter the primary key at its end. */
export function timeOrderedId(ms: number): string {
  if (ms !== prefixMs) {
    const time = ms.toString(16).padStart(12, '0');
    prefix = `${time.slice(0, 8)}-${time.slice(8, 12)}-7`;
    prefixMs = ms;
  }
  // randomUUID is version 4: its version digit (index 14) is replaced, its random bits and variant kept.
  return prefix + randomUUID().slice(15);
}

/** {method, path, variables} as JSON text; the variables are the only part that may need redacting. */
function requestSummary(call: CallRecord, variables: unknown, maxBytes: number): string {
  const head = `{"method":${JSON.stringify(call.method)},"path":${JSON.stringify(boundedMessage(call.path, PATH_MAX_CHARS))},"variables":`;
  return `${head}${summaryText(variables, Math.max(64, maxBytes - head.length - 1))}}`;
}

/** The response a record keeps: the plan's secrets redacted (its JSON text is then no longer the answer's). */
function responseSummary(call: CallRecord, maxBytes: number): string {
  if (call.response === undefined) return '{}';
  const response = call.secrets ? redactResponse(call.secrets, call.response, call.status === 'success') : call.response;
  return summaryText(response, maxBytes, response === call.response ? call.responseText : undefined);
}

export function createExecutionLog(sql: Sql, options: BatchWriterOptions & { summaryMaxBytes: number }, log: Logger): ExecutionLog {
  const writer = createBatchWriter<NewExecution>({
    what: 'custom endpoint execution log',
    insert: (batch) => insertExecutions(sql, batch),
    describe: (x) => ({ endpointId: x.endpointId, status: x.status }),
  }, options, log);
  return {
    record(call) {
      // Redacted and bounded now: the queue holds only what will be stored, never a whole large body.
      const now = Date.now();
      writer.record({
        id: timeOrderedId(now),
        endpointId: call.endpointId,
        callerEntityId: call.callerEntityId,
        status: call.status,
        requestSummary: requestSummary(call, call.secrets ? redactVariables(call.secrets, call.variables) : call.variables, options.summaryMaxBytes),
        responseSummary: responseSummary(call, options.summaryMaxBytes),
        error: call.error ? boundedMessage(call.error) : null,
        at: new Date(now),
      });
    },
    flush: () => writer.flush(),
    close: () => writer.close(),
    get stats() {
      return writer.stats;
    },
  };
}
