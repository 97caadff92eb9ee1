// The worker tasks: every export is a task, run by name through entry.cts (why it is separate: there).
// Tasks do pure CPU work on plain data and return `{ ok: true, ... }` or `{ ok: false, code, message }`:
// thrown errors lose their class and code crossing threads.
import { threadId } from 'node:worker_threads';

export type TaskResult<T> = ({ ok: true } & T) | { ok: false; code: string; message: string };

/** Readiness probe: proves a worker thread starts and answers. */
export function ping(input: { at: number }): TaskResult<{ at: number; threadId: number }> {
  return { ok: true, at: input.at, threadId };
}

export { caKeysGenerate, caKeysImport, caKeysOpen, caKeysSign } from './ca-keys.js';
export { pkiReadCsrs } from './pki-csr.js';
