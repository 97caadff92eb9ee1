// Group commit (and grouped reads) for certificate work: what arrives while a batch is in the database goes
// into the next one, so under load many issuances share one statement and under light load each goes at
// once. A batch that fails is retried item by item, so one bad item fails alone and the others succeed.
// A batch carries several callers' work, so it runs outside any statement scope; an item whose caller's
// scope was abandoned (a custom endpoint call past its time limit) before its batch started is refused.
import { currentScope, outsideScopes, type StatementScope } from '../../db/statement-scope.js';

export interface Batcher<I, O> {
  submit(item: I): Promise<O>;
  readonly stats: { batches: number; items: number; fallbacks: number };
}

interface Pending<I, O> {
  item: I;
  scope: StatementScope | undefined;
  resolve(value: O): void;
  reject(err: unknown): void;
}

/**
 * `run` gets the items of one batch and returns one result per item, in order; it runs its own
 * statement (or transaction). At most `concurrency` batches are in flight, each of at most `maxBatch` items.
 */
export function createBatcher<I, O>(options: { maxBatch: number; concurrency: number; run: (items: I[]) => Promise<O[]> }): Batcher<I, O> {
  let queue: Pending<I, O>[] = [];
  let inFlight = 0;
  const stats = { batches: 0, items: 0, fallbacks: 0 };

  async function runBatch(batch: Pending<I, O>[]): Promise<void> {
    stats.batches++;
    stats.items += batch.length;
    try {
      const results = await options.run(batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i] as O));
    } catch (err) {
      if (batch.length === 1) {
        (batch[0] as Pending<I, O>).reject(err);
        return;
      }
      // Which item failed is unknown: each goes again on its own.
      stats.fallbacks++;
      await Promise.all(batch.map(async (p) => {
        try {
          const [result] = await options.run([p.item]);
          p.resolve(result as O);
        } catch (e) {
          p.reject(e);
        }
      }));
    }
  }

  /** Whether the item may still run; refused (rejected) when its caller's work was abandoned meanwhile. */
  function wanted(p: Pending<I, O>): boolean {
    if (!p.scope?.abandoned) return true;
    try {
      p.scope.refuse();
    } catch (err) {
      p.reject(err);
    }
    return false;
  }

  function pump(): void {
    while (inFlight < options.concurrency && queue.length > 0) {
      const taken = queue.length <= options.maxBatch ? queue : queue.slice(0, options.maxBatch);
      queue = queue.length <= options.maxBatch ? [] : queue.slice(options.maxBatch);
      const batch = taken.filter(wanted);
      if (batch.length === 0) continue;
      inFlight++;
      void outsideScopes(() => runBatch(batch)).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return {
    submit(item: I): Promise<O> {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, scope: currentScope(), resolve, reject });
        // A microtask later, so the callers of this tick join the same batch.
        if (queue.length === 1) queueMicrotask(pump);
      });
    },
    get stats() {
      return { ...stats };
    },
  };
}
