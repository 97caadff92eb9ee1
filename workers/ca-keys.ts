// The CA key tasks: generate, import and sign over both backends, and open the PKCS#11 token. The
// backend configuration comes once per thread through piscina's workerData (caKeys).
import { workerData } from 'node:worker_threads';
import type { CaKeysWorkerData, GenerateTaskInput, KeyTaskOutput, OpenTaskOutput, SignTaskInput, SignTaskOutput } from '../src/pki/keys/tasks.js';
import type { StoredKeyRef } from '../src/pki/keys/types.js';
import { generateEncrypted, importEncrypted, signEncrypted } from './ca-keys-encrypted.js';

// pkcs11js and the ASN.1 schemas load only in threads that reach a token.
const pkcs11 = () => import('./ca-keys-pkcs11.js');

const config = (workerData as { caKeys?: CaKeysWorkerData } | undefined)?.caKeys;

export async function caKeysOpen(): Promise<OpenTaskOutput> {
  return (await pkcs11()).openTask(config);
}

export async function caKeysGenerate(input: GenerateTaskInput): Promise<KeyTaskOutput> {
  return input.backend === 'pkcs11'
    ? (await pkcs11()).generatePkcs11(config, input.algorithm, input.label, input.timeoutMs)
    : generateEncrypted(config, input.algorithm);
}

export function caKeysImport(input: { pem: string }): KeyTaskOutput {
  return importEncrypted(config, input.pem);
}

/** One batch, all of one backend (the main thread keeps a gatherer per backend); results in item order. */
export async function caKeysSign(input: SignTaskInput): Promise<SignTaskOutput> {
  const backend = input.keys[0]?.backend;
  if (input.keys.some((k) => k.backend !== backend)) {
    return { ok: false, code: 'INVALID_KEY', message: 'a signing batch mixes key backends' };
  }
  if (backend === 'pkcs11') {
    const keys = input.keys as Extract<StoredKeyRef, { backend: 'pkcs11' }>[];
    return { ok: true, results: (await pkcs11()).signPkcs11(config, keys, input.items, input.maxRetries, input.progress) };
  }
  const keys = input.keys as Extract<StoredKeyRef, { backend: 'encrypted_database' }>[];
  return { ok: true, results: signEncrypted(config, keys, input.items) };
}
