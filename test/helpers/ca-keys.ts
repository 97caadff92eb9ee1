// CA keys over a real worker pool, configured from an environment the way the service reads it; closed at teardown.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { caKeysWorkerData, createCaKeys, type CaKeys } from '../../src/pki/keys/index.js';
import { createWorkerPool, type WorkerPool } from '../../src/worker-pool.js';

interface Teardown {
  teardown(fn: () => unknown): void;
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
