// The piscina pool for CPU work (signing, CRLs, OCSP): built once in the composition root, bounded queue.
import path from 'node:path';
import { Piscina } from 'piscina';
import { AppError, rateLimited } from './errors.js';
import { workersDir } from './paths.js';

export interface WorkerPool {
  /** Runs an exported task of workers/index; a full queue answers RATE_LIMITED instead of growing memory. */
  run<T>(task: string, input: unknown): Promise<T>;
  readonly stats: { threads: number; queued: number; completed: number };
  close(): Promise<void>;
}

export function createWorkerPool(options: { threads: number; maxQueue: number }): WorkerPool {
  const pool = new Piscina({
    filename: path.join(workersDir, 'index.js'),
    minThreads: 1,
    maxThreads: options.threads,
    maxQueue: options.maxQueue,
    idleTimeout: 30_000,
  });
  return {
    async run<T>(task: string, input: unknown): Promise<T> {
      try {
        return (await pool.run(input, { name: task })) as T;
      } catch (err) {
        if (err instanceof Error && err.message === 'Task queue is at limit') {
          throw rateLimited(1, 'worker queue is full, retry shortly');
        }
        throw new AppError('INTERNAL', 'internal error', { cause: err });
      }
    },
    get stats() {
      return { threads: pool.threads.length, queued: pool.queueSize, completed: pool.completed };
    },
    close: () => pool.destroy(),
  };
}
