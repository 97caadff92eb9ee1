// The encrypted_database CA key backend, main-thread side: it holds only references (ciphertext). Keys are
// generated, imported, unwrapped and used in the workers (workers/ca-keys-encrypted.ts); concurrent signs
// are gathered into one task.
import { unavailable } from '../../errors.js';
import type { WorkerPool } from '../../worker-pool.js';
import { isKeyAlgorithm } from './algorithms.js';
import { asBuffer, keyError } from './failures.js';
import { createGatherer } from './gatherer.js';
import { signOneEncrypted } from '../../../workers/ca-keys-encrypted.js';
import { ecdsaSignerStatus } from '../../../workers/ecdsa-signer.js';
import type { CaKeysWorkerData, GenerateTaskInput, KeyTaskOutput, SignTaskInput, SignTaskOutput } from './tasks.js';
import type { GeneratedKey, KeyAlgorithm, StoredKeyRef } from './types.js';

export type EncryptedRef = Extract<StoredKeyRef, { backend: 'encrypted_database' }>;

/** At ~30 µs per P-256 signature a task of 64 takes ~2 ms: batching pays without holding anyone long. */
const MAX_BATCH = 64;

export interface EncryptedDatabaseKeys {
  generate(algorithm: KeyAlgorithm): Promise<GeneratedKey>;
  importPrivateKey(pem: string): Promise<GeneratedKey>;
  sign(ref: EncryptedRef, data: Buffer): Promise<Buffer>;
  signInProcess(ref: EncryptedRef, data: Buffer): Buffer | null;
  check(ref: EncryptedRef, owner: string): void;
  describe(): Record<string, unknown>;
  close(): Promise<void>;
}

export function keyResult(out: KeyTaskOutput, importing = false): GeneratedKey {
  if (!out.ok) throw keyError(out, importing);
  return { spki: asBuffer(out.spki), ref: out.ref };
}

/** `inProcess`: what the workers get (caKeysWorkerData), for signInProcess on this thread. */
export function createEncryptedDatabaseKeys(options: { workers: WorkerPool; kekConfigured: boolean; kekId: string; inProcess: CaKeysWorkerData }): EncryptedDatabaseKeys {
  const { workers, kekConfigured, kekId, inProcess } = options;
  let signedInProcess = 0;
  const notConfigured = () => unavailable('SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set: the encrypted_database key backend is unavailable');

  const gatherer = createGatherer<{ ref: EncryptedRef; data: Buffer }, Buffer>({
    maxBatch: MAX_BATCH,
    // One batch queued behind each running one, so a worker never waits for the main thread between batches.
    parallel: workers.size * 2,
    async run(batch) {
      const index = new Map<string, number>();
      const input: SignTaskInput = { keys: [], items: [], timeoutMs: 0, maxRetries: 0 };
      for (const { ref, data } of batch) {
        // Equal references share one entry, whether or not they are the same object.
        const id = `${ref.kekId}|${ref.algorithm}|${ref.wrappedDataKey}|${ref.encryptedKey}`;
        let k = index.get(id);
        if (k === undefined) {
          k = input.keys.push(ref) - 1;
          index.set(id, k);
        }
        // A copy with its own ArrayBuffer: cloning a pooled Buffer's view would copy the whole 8 KiB pool.
        input.items.push({ k, data: new Uint8Array(data) });
      }
      const out = await workers.run<SignTaskOutput>('caKeysSign', input);
      if (!out.ok) return batch.map(() => keyError(out));
      return out.results.map((r) => (r.ok ? asBuffer(r.sig) : keyError(r)));
    },
  });

  function check(ref: EncryptedRef, owner: string): void {
    if (!kekConfigured) {
      throw unavailable(`${owner}: its key is kept encrypted in the database, but SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set`);
    }
    if (ref.kekId !== kekId) {
      throw unavailable(`${owner}: its key is wrapped by key-encryption key '${ref.kekId}', which this configuration does not have (SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID is '${kekId}')`);
    }
    if (!isKeyAlgorithm(ref.algorithm) || typeof ref.wrappedDataKey !== 'string' || typeof ref.encryptedKey !== 'string') {
      throw unavailable(`${owner}: its stored key reference is malformed`);
    }
  }

  return {
    async generate(algorithm) {
      if (!kekConfigured) throw notConfigured();
      const input: GenerateTaskInput = { backend: 'encrypted_database', algorithm, label: '', timeoutMs: 0, maxRetries: 0 };
      return keyResult(await workers.run<KeyTaskOutput>('caKeysGenerate', input));
    },
    async importPrivateKey(pem) {
      if (!kekConfigured) throw notConfigured();
      return keyResult(await workers.run<KeyTaskOutput>('caKeysImport', { pem }), true);
    },
    async sign(ref, data) {
      check(ref, 'CA key');
      return gatherer.submit({ ref, data });
    },
    signInProcess(ref, data) {
      if (!kekConfigured || ref.kekId !== kekId) return null;
      // The worker's own code on this thread: the key unwrapped once and kept in this thread's memory.
      const signature = signOneEncrypted(inProcess, ref, data);
      if (!Buffer.isBuffer(signature)) return null;
      signedInProcess++;
      return signature;
    },
    check,
    describe() {
      const s = gatherer.stats;
      return {
        configured: kekConfigured, kek_id: kekId, ecdsa_signer: ecdsaSignerStatus().native ? 'native' : 'node:crypto',
        sign_tasks: s.tasks, signatures: s.items, waiting: s.waiting, signed_in_process: signedInProcess,
      };
    },
    close: () => gatherer.close(),
  };
}
