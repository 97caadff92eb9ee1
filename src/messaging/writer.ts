// Group commit: publishes from concurrent requests share one INSERT per batch on dedicated connections;
// each publish is acknowledged only once its batch committed. A bounded queue, and a database that is
// down answers 503 at once instead of letting requests hang.
import { performance } from 'node:perf_hooks';
import postgres from 'postgres';
import { reconnectDelaySecs, type Sql } from '../db/client.js';
import { AppError, isDataError, toAppError, unavailable } from '../errors.js';
import type { Logger } from '../log.js';
import { BucketCounts, LATENCY_SECONDS } from '../metrics/buckets.js';
import { buildBatch, type BatchItem } from './batch-literals.js';
import { insertBatch } from './queries.js';
import type { StoredMessage, WriterBatches } from './types.js';

export interface WriterSettings {
  /** Most rows in one INSERT (a single publish larger than this is its own batch). */
  batchSize: number;
  /**
   * Longest a free writer waits for company, and only while fewer rows wait than the previous batch held
   * (0: never wait beyond the current event-loop turn).
   */
  batchWaitMs: number;
  /** Dedicated connections, each with one batch in flight. */
  connections: number;
  /** Most messages waiting or being written; beyond it publishes answer 503 with Retry-After. */
  maxQueue: number;
  /** A batch not committed by then fails (503) and its connection is replaced. */
  writeTimeoutMs: number;
  connectTimeoutSecs: number;
}

interface Job extends BatchItem {
  /** What the publish's promise resolves with once its batch committed. */
  answer: unknown;
  resolve: (answer: unknown) => void;
  reject: (err: AppError) => void;
  /** Set after its batch was refused for another publish's sake: it is retried in a batch of its own. */
  solo: boolean;
  attempts: number;
}

export interface Writer {
  /**
   * Resolves with `answer` once the batch holding these messages committed (the caller's reply, so it
   * needs no promise step of its own); rejects with UNAVAILABLE otherwise.
   */
  write<T>(workspaceId: string, messages: StoredMessage[], answer: T): Promise<T>;
  readonly down: boolean;
  /** committed: publishes whose batch committed (each was answered as stored). */
  stats(): { queued: number; highWater: number; batches: number; stored: number; committed: number; failed: number };
  /** Rows per committed batch and seconds from a batch's start to its commit (one observation per batch). */
  readonly batches: WriterBatches;
  /** Writes what is queued, then closes the connections. */
  close(): Promise<void>;
}


/** Rows per batch: a lone publisher's 1 up to SVC_MESSAGING_BATCH_SIZE's default range. */
export const BATCH_ROWS: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

// The first probe comes quickly (a killed connection reconnects at once), later ones back off.
const PROBE_FIRST_MS = 20;
const PROBE_MAX_MS = 500;
const PROBE_TIMEOUT_MS = 1000;
const RETRY_AFTER_SECS = 1;
const MAX_ATTEMPTS = 3;
const timedOut = () => new AppError('UNAVAILABLE', 'database did not answer in time', { code: 'WRITE_TIMEOUT', retryAfterSeconds: RETRY_AFTER_SECS });

export function createWriter(url: string, settings: WriterSettings, log: Logger, onCommitted: (jobs: readonly BatchItem[]) => void): Writer {
  // Default plan mode and prepared statements: the insert text never changes, a generic plan is right.
  // fetch_types off: the batch sends array literals, so no array parsers are needed, and postgres.js
  // runs that lookup in a promise nobody awaits, which a connection killed at that moment turns into an
  // unhandled rejection (seen when a database restarts).
  const connect = (): Sql => postgres(url, {
    max: 1, prepare: true, fetch_types: false, idle_timeout: undefined, max_lifetime: null,
    connect_timeout: settings.connectTimeoutSecs, onnotice: () => undefined, backoff: reconnectDelaySecs,
    connection: { application_name: 'svc-writer' },
  }) as unknown as Sql;
  const conns: Sql[] = Array.from({ length: settings.connections }, connect);
  const idle: number[] = conns.map((_, i) => i);
  let queue: Job[] = [];
  let queued = 0;
  let highWater = 0;
  let batches = 0;
  let stored = 0;
  let committed = 0;
  let failed = 0;
  const timing: WriterBatches = { rows: new BucketCounts(BATCH_ROWS), commitSeconds: new BucketCounts(LATENCY_SECONDS) };
  let scheduled = false;
  let fillTimer: NodeJS.Timeout | undefined;
  /** Rows in the queue, not yet taken into a batch; `queued` also counts rows being written. */
  let waitingRows = 0;
  // The most messages outstanding (waiting or being written) lately: the demand a batch can gather.
  let peakNow = 0;
  let peakPrev = 0;
  let peakSince = Date.now();
  let down = false;
  let probing: NodeJS.Timeout | undefined;
  let probeDelay = PROBE_FIRST_MS;
  let closing = false;
  let inFlight = 0;
  let idleWaiters: (() => void)[] = [];

  /**
   * Closed-loop clients (each waiting for its acknowledgement before sending again) come back together
   * right after a commit: flushing the first arrivals at once would halve every batch. So a free writer
   * waits, at most batchWaitMs, until as many messages wait as were outstanding at the recent peak (less
   * those other connections are writing); a lone publisher (a peak of one) never waits. Waiting for the
   * whole peak rather than most of it keeps the stragglers of one round out of a batch of their own: at
   * 64 closed-loop publishers, 62-67 rows per commit instead of 45-53 (bench ingest-http-1).
   * setImmediate gathers what arrived in the same I/O phase.
   */
  function schedule(): void {
    if (scheduled || queue.length === 0 || idle.length === 0) return;
    scheduled = true;
    rotatePeak();
    if (settings.batchWaitMs === 0 || waitingRows >= fillTarget()) {
      setImmediate(flush);
    } else {
      fillTimer = setTimeout(flush, settings.batchWaitMs);
    }
  }

  /** The recent peak of outstanding messages, less those other connections are writing now. */
  function fillTarget(): number {
    const writing = queued - waitingRows;
    return Math.min(settings.batchSize, Math.max(1, Math.max(peakNow, peakPrev) - writing));
  }

  /**
   * Two 100 ms buckets, so the peak follows the load down within 200 ms. Turned when a batch is
   * scheduled (the clock read once per batch, not per publish); each publish only raises peakNow.
   */
  function rotatePeak(): void {
    const now = Date.now();
    if (now - peakSince >= 100) {
      peakPrev = now - peakSince >= 200 ? 0 : peakNow;
      peakNow = queued;
      peakSince = now;
    }
  }

  /** A writer waiting for company flushes as soon as enough arrived. */
  function filled(): void {
    if (fillTimer !== undefined && waitingRows >= fillTarget()) {
      clearTimeout(fillTimer);
      fillTimer = undefined;
      setImmediate(flush);
    }
  }

  function take(): Job[] {
    let rows = 0;
    let n = 0;
    while (n < queue.length) {
      const job = queue[n] as Job;
      const size = job.messages.length;
      if (n > 0 && (job.solo || rows + size > settings.batchSize)) break;
      rows += size;
      n++;
      if (job.solo) break;
    }
    const jobs = n === queue.length ? queue : queue.slice(0, n);
    queue = n === queue.length ? [] : queue.slice(n);
    waitingRows -= rows;
    return jobs;
  }

  function flush(): void {
    scheduled = false;
    fillTimer = undefined;
    while (queue.length > 0 && idle.length > 0) run(idle.pop() as number, take());
  }

  function countRows(jobs: readonly Job[]): number {
    let rows = 0;
    for (const j of jobs) rows += j.messages.length;
    return rows;
  }

  function run(slot: number, jobs: Job[]): void {
    inFlight++;
    const rows = countRows(jobs);
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOut()), settings.writeTimeoutMs);
    });
    // Built inside the chain: a throw while building fails this batch instead of stranding its publishes.
    Promise.race([Promise.resolve(jobs).then((j) => insertBatch(conns[slot] as Sql, buildBatch(j))), timeout]).then(() => {
      clearTimeout(timer);
      batches++;
      timing.rows.observe(rows);
      timing.commitSeconds.observe((performance.now() - started) / 1000);
      stored += rows;
      committed += jobs.length;
      queued -= rows;
      for (const j of jobs) j.resolve(j.answer);
      release(slot);
      try {
        onCommitted(jobs);
      } catch (err) {
        log.error('stored-message listener failed', { err });
      }
    }, (err: unknown) => {
      clearTimeout(timer);
      queued -= rows;
      const code = (err as { code?: unknown } | null)?.code;
      const appErr = toAppError(err);
      if ((code === '40P01' || code === '40001') && (jobs[0] as Job).attempts < MAX_ATTEMPTS) {
        // Two writers crossing on the per-channel counters: the batch did nothing; run it again.
        requeue(jobs, false);
      } else if (appErr.kind === 'UNAVAILABLE' || (typeof code === 'string' && !isDataError(err))) {
        // Anything but the data itself (connection lost or refused, database shutting down or not
        // accepting connections, a hung server) is the database being away: 503 now, probe until back.
        if (appErr.code === 'WRITE_TIMEOUT') replace(slot);
        markDown(appErr);
        failJobs(jobs, unavailable('database unavailable; message not stored', RETRY_AFTER_SECS));
      } else if (jobs.length > 1) {
        // Not the database being away but one publish it (or building the batch) refused: retry each
        // alone so the others commit.
        log.warn('batch refused; retrying its publishes one by one', { err: String(err) });
        requeue(jobs, true);
      } else {
        log.error('message insert failed', { err });
        failJobs(jobs, appErr);
      }
      release(slot);
    });
  }

  function requeue(jobs: readonly Job[], solo: boolean): void {
    for (let i = jobs.length - 1; i >= 0; i--) {
      const j = jobs[i] as Job;
      j.attempts++;
      if (solo) j.solo = true;
      queued += j.messages.length;
      waitingRows += j.messages.length;
      queue.unshift(j);
    }
  }

  function release(slot: number): void {
    inFlight--;
    idle.push(slot);
    if (inFlight === 0 && queue.length === 0) for (const w of idleWaiters.splice(0)) w();
    if (!down) schedule();
  }

  function failJobs(jobs: readonly Job[], err: AppError): void {
    failed += jobs.length;
    const answer = err.kind === 'UNAVAILABLE' ? unavailable('database unavailable; message not stored', RETRY_AFTER_SECS) : err;
    for (const j of jobs) j.reject(answer);
  }

  function replace(slot: number): void {
    const old = conns[slot] as Sql;
    conns[slot] = connect();
    void old.end({ timeout: 0 }).catch(() => undefined);
  }

  function markDown(err: AppError): void {
    if (!down) log.warn('message writer: database unavailable; publishes answer 503 until it is back', { err: String(err.cause ?? err.message) });
    down = true;
    // Everything waiting would only wait for the same failure: answer now.
    const waiting = queue;
    queue = [];
    waitingRows = 0;
    for (const j of waiting) queued -= j.messages.length;
    failJobs(waiting, unavailable('database unavailable', RETRY_AFTER_SECS));
    if (probing === undefined) {
      probeDelay = PROBE_FIRST_MS;
      probing = setTimeout(probe, probeDelay);
    }
  }

  function probe(): void {
    const conn = conns[0] as Sql;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      // `select 1` answers in milliseconds when the server is there: do not wait a whole write timeout.
      timer = setTimeout(() => reject(new Error('probe timed out')), Math.min(settings.writeTimeoutMs, PROBE_TIMEOUT_MS));
    });
    Promise.race([conn`select 1`, timeout]).then(() => {
      clearTimeout(timer);
      probing = undefined;
      down = false;
      log.info('message writer: database reachable again');
      schedule();
    }, (err: unknown) => {
      clearTimeout(timer);
      // postgres.js can leave a query pending forever on a connection killed mid-flight: start afresh.
      if (String(err).includes('probe timed out')) replace(0);
      probeDelay = Math.min(probeDelay * 2, PROBE_MAX_MS);
      probing = closing ? undefined : setTimeout(probe, probeDelay);
    });
  }

  return {
    write(workspaceId, messages, answer) {
      if (closing) return Promise.reject(unavailable('shutting down', RETRY_AFTER_SECS));
      if (down) return Promise.reject(unavailable('database unavailable', RETRY_AFTER_SECS));
      const n = messages.length;
      if (queued + n > settings.maxQueue) return Promise.reject(unavailable('ingest queue is full', RETRY_AFTER_SECS));
      queued += n;
      waitingRows += n;
      if (queued > highWater) highWater = queued;
      if (queued > peakNow) peakNow = queued;
      return new Promise((resolve, reject) => {
        queue.push({ workspaceId, messages, answer, resolve: resolve as (answer: unknown) => void, reject, solo: false, attempts: 0 });
        if (scheduled) filled();
        else schedule();
      });
    },
    get down() {
      return down;
    },
    stats: () => ({ queued, highWater, batches, stored, committed, failed }),
    batches: timing,
    async close() {
      closing = true;
      if (probing) clearTimeout(probing);
      if (down) {
        for (const j of queue) queued -= j.messages.length;
        failJobs(queue, unavailable('shutting down', RETRY_AFTER_SECS));
        queue = [];
        waitingRows = 0;
      }
      if (inFlight > 0 || queue.length > 0) {
        await new Promise<void>((resolve) => {
          idleWaiters.push(resolve);
          schedule();
        });
      }
      idleWaiters = [];
      await Promise.all(conns.map((c) => c.end({ timeout: 5 })));
    },
  };
}
