// The piscina pool for CPU work (signing, CRLs, OCSP): built once in the composition root, bounded queue.
import path from 'node:path';
import { Piscina } from 'piscina';
import { AppError, rateLimited } from './errors.js';
import { workersDir } from './paths.js';

export interface WorkerPool {
  /**
   * Runs an exported task of workers/index; a full queue answers RATE_LIMITED instead of growing memory.
   * Aborting `signal` while the task runs terminates its thread (piscina starts another): the way out of a
   * thread stuck in a native call; the task then fails with UNAVAILABLE.
   */
  run<T>(task: string, input: unknown, options?: { signal?: AbortSignal }): Promise<T>;
  /** utilization: piscina's share of the threads' capacity spent running tasks since the pool started (0..1). */
  readonly stats: { threads: number; queued: number; completed: number; utilization: number };
  /** The most threads the pool runs (SVC_WORKER_THREADS): how many tasks can make progress at once. */
  readonly size: number;
  close(): Promise<void>;
}

/** The file piscina loads in every thread: CommonJS, it loads the tasks with import() (why: in it). */
export const WORKER_ENTRY = path.join(workersDir, 'entry.cjs');

const MODULE_HOOK_FLAGS = new Set(['--import', '--require', '-r', '--loader', '--experimental-loader']);

/**
 * The process's execArgv without module hooks (--import, --require, --loader): worker threads inherit
 * execArgv, but they run compiled code and need no hooks; a test runner's (tap's TypeScript loader) only
 * slows every thread's start.
 */
export function withoutModuleHooks(execArgv: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i] as string;
    const name = arg.split('=', 1)[0] as string;
    if (!MODULE_HOOK_FLAGS.has(name)) kept.push(arg);
    else if (name === arg) i++; // the flag's value is the next argument
  }
  return kept;
}

/**
 * `workerData` reaches every thread as node:worker_threads workerData (the CA key backends' settings).
 * `keepThreads`: never retire idle threads. A thread holding a PKCS#11 session cannot close it when piscina
 * terminates it (no JS runs at termination), so with PKCS#11 the threads live as long as the pool.
 */
export function createWorkerPool(options: { threads: number; maxQueue: number; workerData?: unknown; keepThreads?: boolean }): WorkerPool {
  const pool = new Piscina({
    filename: WORKER_ENTRY,
    minThreads: options.keepThreads ? options.threads : 1,
    maxThreads: options.threads,
    maxQueue: options.maxQueue,
    idleTimeout: 30_000,
    workerData: options.workerData,
    execArgv: withoutModuleHooks(process.execArgv),
  });
  return {
    async run<T>(task: string, input: unknown, options: { signal?: AbortSignal } = {}): Promise<T> {
      try {
        return (await pool.run({ task, input }, { signal: options.signal ?? null })) as T;
      } catch (err) {
        if (err instanceof Error && err.message === 'Task queue is at limit') {
          throw rateLimited(1, 'worker queue is full, retry shortly');
        }
        if (err instanceof Error && err.name === 'AbortError') {
          throw new AppError('UNAVAILABLE', `worker task ${task} aborted`, { cause: err });
        }
        // The thread running the task died (a fatal error, out of memory, terminated): piscina starts
        // another. The task's result never came back, so nothing of it was used: the caller may retry.
        if (err instanceof Error && /^worker exited with code|^Terminating worker thread/.test(err.message)) {
          throw new AppError('UNAVAILABLE', `worker thread exited during ${task}; nothing was done, retry`, { cause: err, retryAfterSeconds: 1 });
        }
        throw new AppError('INTERNAL', 'internal error', { cause: err });
      }
    },
    get stats() {
      return { threads: pool.threads.length, queued: pool.queueSize, completed: pool.completed, utilization: pool.utilization };
    },
    size: options.threads,
    close: () => pool.destroy(),
  };
}
