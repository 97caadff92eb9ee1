// CA keys over a real worker pool, configured from an environment the way the service reads it; closed at teardown.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { caKeysWorkerData, createCaKeys, type CaKeys, type KeyAlgorithm } from '../../src/pki/keys/index.js';
import { createWorkerPool, type WorkerPool } from '../../src/worker-pool.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The digest node:crypto's verify takes for an algorithm's signatures (null: Ed25519 signs the message itself). */
export const hashOf = (a: KeyAlgorithm) => (a === 'ed25519' ? null : a === 'ecdsa-p384' ? 'sha384' : 'sha256');

/** openssl's own verdict on a signature over data by the key with this SubjectPublicKeyInfo (throws when it fails). */
export function opensslVerify(spki: Buffer, algorithm: KeyAlgorithm, data: Buffer, sig: Buffer): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'ca-keys-'));
  const f = (n: string) => path.join(dir, n);
  writeFileSync(f('pub.der'), spki);
  writeFileSync(f('data'), data);
  writeFileSync(f('sig'), sig);
  const args = algorithm === 'ed25519'
    ? ['pkeyutl', '-verify', '-pubin', '-keyform', 'DER', '-inkey', f('pub.der'), '-rawin', '-in', f('data'), '-sigfile', f('sig')]
    : ['dgst', `-${hashOf(algorithm)}`, '-keyform', 'DER', '-verify', f('pub.der'), '-signature', f('sig'), f('data')];
  return execFileSync('openssl', args, { stdio: 'pipe' }).toString().trim();
}

/** A fresh base64 key-encryption key for SVC_PKI_CA_KEY_ENCRYPTION_KEY. */
export function newKek(): string {
  return randomBytes(32).toString('base64');
}

export async function startCaKeys(t: Teardown, env: Record<string, string>, threads = 2): Promise<{ caKeys: CaKeys; workers: WorkerPool }> {
  const config = loadConfig(env);
  const data = caKeysWorkerData(config.pki);
  const workers = createWorkerPool({ threads, maxQueue: 1024, workerData: { caKeys: data }, keepThreads: data.pkcs11 !== null });
  let caKeys: CaKeys;
  try {
    caKeys = await createCaKeys({ workers, config: config.pki, log: createLogger((process.env.SVC_TEST_LOG_LEVEL as 'debug') ?? 'silent') });
  } catch (err) {
    await workers.close();
    throw err;
  }
  t.teardown(async () => {
    await caKeys.close();
    await workers.close();
  });
  return { caKeys, workers };
}
