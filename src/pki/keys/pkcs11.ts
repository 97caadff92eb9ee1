// The pkcs11 CA key backend, main-thread side: only token-object references live here. It bounds the
// operations in flight (SVC_PKI_PKCS11_MAX_IN_FLIGHT, beyond: RATE_LIMITED), keeps the circuit breaker
// (open: UNAVAILABLE at once, no worker task), and gathers signs into worker tasks; each worker thread has
// its own session (workers/ca-keys-pkcs11.ts), which retries transient errors; the operation timeout is a
// watchdog here over the worker's progress.
import { AppError, rateLimited, unavailable } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { WorkerPool } from '../../worker-pool.js';
import { isKeyAlgorithm } from './algorithms.js';
import { createBreaker, type Outcome, type Ticket } from './breaker.js';
import { keyResult } from './encrypted-database.js';
import { asBuffer, countsAgainstToken, keyError } from './failures.js';
import { createGatherer } from './gatherer.js';
import type { GenerateTaskInput, KeyFailure, KeyTaskOutput, OpenTaskOutput, SignTaskInput, SignTaskOutput } from './tasks.js';
import type { GeneratedKey, KeyAlgorithm, StoredKeyRef } from './types.js';

export type Pkcs11Ref = Extract<StoredKeyRef, { backend: 'pkcs11' }>;

export interface Pkcs11Settings {
  modulePath: string | undefined;
  tokenLabel: string | undefined;
  userPin: string | undefined;
  operationTimeoutMs: number;
  maxRetries: number;
  maxInFlight: number;
  circuitFailureThreshold: number;
  circuitResetSecs: number;
}

export interface Pkcs11Keys {
  readonly configured: boolean;
  /** Opens the token in a worker: a wrong module, label or PIN stops the start with a message naming the setting. */
  start(): Promise<void>;
  generate(algorithm: KeyAlgorithm, label: string): Promise<GeneratedKey>;
  sign(ref: Pkcs11Ref, data: Buffer): Promise<Buffer>;
  check(ref: Pkcs11Ref, owner: string): void;
  describe(): Record<string, unknown>;
  close(): Promise<void>;
}

/** Generation (async in the worker, with its own timeout) gets at least this long, plus one operation timeout of slack. */
const GENERATE_MIN_TIMEOUT_MS = 60_000;

/** A backstop for key generation stuck in a synchronous part (its async call has the worker's own timeout). */
function backstop<T>(call: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(late()), ms);
  });
  return Promise.race([call, expired]).finally(() => clearTimeout(timer));
}

export function createPkcs11Keys(options: { workers: WorkerPool; settings: Pkcs11Settings; log: Logger }): Pkcs11Keys {
  const { workers, settings, log } = options;
  const tokenLabel = settings.tokenLabel ?? '';
  const configured = Boolean(settings.modulePath && settings.tokenLabel && settings.userPin);
  const what = `PKCS#11 token '${tokenLabel}'`;
  const breaker = createBreaker({ threshold: settings.circuitFailureThreshold, resetMs: settings.circuitResetSecs * 1000, what });
  let inFlight = 0;
  let eddsa: boolean | null = null;

  const outcome = (r: { ok: true } | KeyFailure): Outcome => (r.ok ? 'success' : countsAgainstToken(r) ? 'failure' : 'neutral');
  const lateFailure = (ms: number): KeyFailure => ({ ok: false, code: 'TIMEOUT', message: `${what} did not answer within ${ms} ms (the worker is stuck in a token call)` });

  /** Admission: breaker first (an open one answers without any task), then the in-flight bound. */
  function admit(): Ticket {
    if (!configured) throw unavailable('SVC_PKI_PKCS11_MODULE_PATH, _TOKEN_LABEL and _USER_PIN are not all set: the pkcs11 key backend is unavailable');
    const ticket = breaker.admit();
    if (inFlight >= settings.maxInFlight) {
      breaker.record(ticket, 'neutral');
      throw rateLimited(1, `too many PKCS#11 operations in flight (SVC_PKI_PKCS11_MAX_IN_FLIGHT=${settings.maxInFlight}); retry shortly`);
    }
    inFlight++;
    return ticket;
  }

  /**
   * One batch in a worker. The worker's token calls are synchronous (cheap), so the per-operation timeout
   * is kept here: a watchdog reads the progress counter the worker bumps before each attempt, and when it
   * has not moved for the timeout, aborts the task, which terminates the stuck thread (piscina starts a
   * fresh one with its own session). The hung item is the one failure; the others are answered unavailable.
   */
  async function runBatch(batch: { ref: Pkcs11Ref; data: Buffer; ticket: Ticket }[]): Promise<(Buffer | Error)[]> {
    const index = new Map<string, number>();
    const shared = new SharedArrayBuffer(8);
    const input: SignTaskInput = { keys: [], items: [], timeoutMs: settings.operationTimeoutMs, maxRetries: settings.maxRetries, progress: shared };
    for (const { ref, data } of batch) {
      let k = index.get(ref.keyId);
      if (k === undefined) {
        k = input.keys.push(ref) - 1;
        index.set(ref.keyId, k);
      }
      input.items.push({ k, data: new Uint8Array(data) });
    }
    const progress = new Int32Array(shared);
    const abort = new AbortController();
    let seen = 0;
    let since = performance.now();
    const watchdog = setInterval(() => {
      const now = performance.now();
      const count = Atomics.load(progress, 0);
      if (count !== seen) {
        seen = count;
        since = now;
      } else if (count > 0 && now - since >= settings.operationTimeoutMs) {
        abort.abort();
      }
    }, Math.max(5, Math.floor(settings.operationTimeoutMs / 4)));
    let out: SignTaskOutput;
    try {
      out = await workers.run<SignTaskOutput>('caKeysSign', input, { signal: abort.signal });
    } catch (err) {
      if (abort.signal.aborted) {
        const hung = Atomics.load(progress, 1);
        log.warn('PKCS#11 operation timed out; its worker thread was replaced', { token_label: tokenLabel, timeout_ms: settings.operationTimeoutMs });
        return batch.map(({ ticket }, i) => {
          const r: KeyFailure = i === hung
            ? { ok: false, code: 'TIMEOUT', message: `${what} did not answer within ${settings.operationTimeoutMs} ms (SVC_PKI_PKCS11_OPERATION_TIMEOUT_MS)` }
            : { ok: false, code: 'SKIPPED', message: `${what}: not answered, another operation of its batch timed out` };
          breaker.record(ticket, outcome(r));
          return keyError(r);
        });
      }
      // A full worker queue says nothing about the token; a crashed worker does.
      const refused = err instanceof AppError && err.kind === 'RATE_LIMITED';
      for (const { ticket } of batch) breaker.record(ticket, refused ? 'neutral' : 'failure');
      return batch.map(() => (err instanceof Error ? err : new Error(String(err))));
    } finally {
      clearInterval(watchdog);
    }
    return batch.map(({ ticket }, i) => {
      const r: { ok: true; sig: Uint8Array } | KeyFailure = out.ok ? out.results[i] ?? { ok: false, code: 'SKIPPED', message: 'no answer for this item' } : out;
      breaker.record(ticket, outcome(r));
      if (!r.ok && countsAgainstToken(r)) log.warn('PKCS#11 operation failed', { code: r.code, message: r.message });
      return r.ok ? asBuffer(r.sig) : keyError(r);
    });
  }

  const gatherer = createGatherer<{ ref: Pkcs11Ref; data: Buffer; ticket: Ticket }, Buffer>({
    // In-flight operations bound the batch already; the worker signs a batch's items one after another.
    maxBatch: settings.maxInFlight,
    // One batch queued behind each running one, so a worker never waits for the main thread between batches.
    parallel: workers.size * 2,
    run: runBatch,
  });

  function check(ref: Pkcs11Ref, owner: string): void {
    if (!configured) {
      throw unavailable(`${owner}: its key is on PKCS#11 token '${ref.tokenLabel}', but SVC_PKI_PKCS11_MODULE_PATH, _TOKEN_LABEL and _USER_PIN are not all set`);
    }
    if (ref.tokenLabel !== tokenLabel) {
      throw unavailable(`${owner}: its key is on PKCS#11 token '${ref.tokenLabel}', but SVC_PKI_PKCS11_TOKEN_LABEL is '${tokenLabel}'`);
    }
    if (!isKeyAlgorithm(ref.algorithm) || !/^[0-9a-f]+$/.test(ref.keyId ?? '')) {
      throw unavailable(`${owner}: its stored key reference is malformed`);
    }
  }

  return {
    configured,
    async start() {
      if (!configured) return;
      const out = await workers.run<OpenTaskOutput>('caKeysOpen', {});
      if (!out.ok) throw unavailable(out.message);
      eddsa = out.eddsa;
      log.info('PKCS#11 token open', { token_label: out.tokenLabel, eddsa: out.eddsa });
    },
    async generate(algorithm, label) {
      const ticket = admit();
      try {
        const input: GenerateTaskInput = { backend: 'pkcs11', algorithm, label, timeoutMs: settings.operationTimeoutMs, maxRetries: settings.maxRetries };
        const ms = Math.max(settings.operationTimeoutMs, GENERATE_MIN_TIMEOUT_MS) + settings.operationTimeoutMs;
        let out: KeyTaskOutput;
        try {
          out = await backstop(workers.run<KeyTaskOutput>('caKeysGenerate', input), ms, () => lateFailure(ms));
        } catch (err) {
          breaker.record(ticket, err instanceof AppError && err.kind === 'RATE_LIMITED' ? 'neutral' : 'failure');
          throw err;
        }
        breaker.record(ticket, outcome(out));
        return keyResult(out);
      } finally {
        inFlight--;
      }
    },
    async sign(ref, data) {
      check(ref, 'CA key');
      const ticket = admit();
      try {
        return await gatherer.submit({ ref, data, ticket });
      } finally {
        inFlight--;
      }
    },
    check,
    describe() {
      const s = gatherer.stats;
      return {
        configured,
        token_label: configured ? tokenLabel : null,
        eddsa,
        ...breaker.describe(),
        in_flight: inFlight,
        max_in_flight: settings.maxInFlight,
        sign_tasks: s.tasks,
        signatures: s.items,
      };
    },
    close: () => gatherer.close(),
  };
}
