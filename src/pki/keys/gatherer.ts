// Gathers concurrent signing requests into batches, one worker task per batch, the way the ingest writer
// gathers rows into one commit: with fewer than `parallel` tasks running a request leaves on the next
// event-loop turn with whatever arrived alongside it (spread over the free slots); otherwise it waits for a
// running task to finish (a batch's time, a few ms) and goes with what queued meanwhile, up to `maxBatch`.
import { unavailable } from '../../errors.js';

export interface Gatherer<I, R> {
  submit(item: I): Promise<R>;
  /** Tasks run and items carried since start; waiting and running now. */
  readonly stats: { tasks: number; items: number; waiting: number; running: number };
  /** Refuses new items and resolves once everything accepted has been answered. */
  close(): Promise<void>;
}

interface Pending<I, R> {
  item: I;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

/** `run` answers per item, in order: a value, or an Error that rejects that item alone. */
export function createGatherer<I, R>(options: { maxBatch: number; parallel: number; run: (items: I[]) => Promise<(R | Error)[]> }): Gatherer<I, R> {
  const waiting: Pending<I, R>[] = [];
  let running = 0;
  let scheduled = false;
  let closed = false;
  let idle: (() => void) | null = null;
  const stats = { tasks: 0, items: 0 };

  const settle = (batch: Pending<I, R>[], results: (R | Error)[] | Error) => {
    batch.forEach((p, i) => {
      const r = results instanceof Error ? results : results[i];
      if (r instanceof Error) p.reject(r);
      else if (r === undefined) p.reject(new Error('signing task answered fewer results than items'));
      else p.resolve(r);
    });
  };

  const flush = () => {
    scheduled = false;
    while (running < options.parallel && waiting.length > 0) {
      // Spread what waits over the free slots: a worker busy with one half while the main thread answers the
      // other keeps both sides working, where one full batch would leave each idle in turn.
      const size = Math.min(options.maxBatch, Math.ceil(waiting.length / (options.parallel - running)));
      const batch = waiting.splice(0, size);
      running++;
      stats.tasks++;
      stats.items += batch.length;
      options.run(batch.map((p) => p.item)).then(
        (results) => settle(batch, results),
        (err: unknown) => settle(batch, err instanceof Error ? err : new Error(String(err))),
      ).finally(() => {
        running--;
        if (waiting.length > 0) schedule();
        else if (running === 0 && idle) idle();
      });
    }
  };

  function schedule() {
    if (scheduled || running >= options.parallel) return;
    scheduled = true;
    setImmediate(flush);
  }

  return {
    submit(item) {
      if (closed) return Promise.reject(unavailable('the CA key service is shutting down'));
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        schedule();
      });
    },
    get stats() {
      return { ...stats, waiting: waiting.length, running };
    },
    close() {
      closed = true;
      if (running === 0 && waiting.length === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        idle = resolve;
      });
    },
  };
}
