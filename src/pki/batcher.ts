// Group commit (and grouped reads) for certificate work: what arrives while a batch is in the database goes
// into the next one, so under load many issuances share one statement and under light load each goes at
// once. A batch that fails is retried item by item, so one bad item fails alone and the others succeed.

export interface Batcher<I, O> {
  submit(item: I): Promise<O>;
  readonly stats: { batches: number; items: number; fallbacks: number };
}

interface Pending<I, O> {
  item: I;
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

  function pump(): void {
    while (inFlight < options.concurrency && queue.length > 0) {
      const batch = queue.length <= options.maxBatch ? queue : queue.slice(0, options.maxBatch);
      queue = queue.length <= options.maxBatch ? [] : queue.slice(options.maxBatch);
      inFlight++;
      void runBatch(batch).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return {
    submit(item: I): Promise<O> {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        // A microtask later, so the callers of this tick join the same batch.
        if (queue.length === 1) queueMicrotask(pump);
      });
    },
    get stats() {
      return { ...stats };
    },
  };
}
