// The CA keys: both backends behind the CaKeys contract (types.ts), built once in the composition root
// after the worker pool. The only module other parts of the certificate authority import for keys.
import type { Config } from '../../config.js';
import { ecdsaSignerStatus } from '../../../workers/ecdsa-signer.js';
import { unavailable } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { WorkerPool } from '../../worker-pool.js';
import { createEncryptedDatabaseKeys } from './encrypted-database.js';
import { createPkcs11Keys } from './pkcs11.js';
import type { CaKeysWorkerData } from './tasks.js';
import type { CaKeys } from './types.js';

export type { CaKeys, GeneratedKey, KeyAlgorithm, KeyBackendKind, StoredKeyRef } from './types.js';
export { KEY_ALGORITHMS } from './types.js';
export { ALGORITHMS, algorithmOfKey, isKeyAlgorithm } from './algorithms.js';

type PkiConfig = Config['pki'];

/** What every worker thread needs to reach the keys; give it to createWorkerPool as workerData.caKeys. */
export function caKeysWorkerData(config: PkiConfig): CaKeysWorkerData {
  const { modulePath, tokenLabel, userPin } = config.pkcs11;
  return {
    kek: config.caKeyEncryptionKey ? config.caKeyEncryptionKey.toString('base64') : null,
    kekId: config.caKeyEncryptionKeyId,
    pkcs11: modulePath && tokenLabel && userPin ? { modulePath, tokenLabel, userPin } : null,
  };
}

/**
 * Builds the CA keys; with PKCS#11 configured it opens the token first, so a wrong module, token label or
 * PIN stops the start with a message naming the setting. `workers` must have been built with
 * workerData: { caKeys: caKeysWorkerData(config) }.
 */
export async function createCaKeys(options: { workers: WorkerPool; config: PkiConfig; log: Logger }): Promise<CaKeys> {
  const { workers, config, log } = options;
  const encrypted = createEncryptedDatabaseKeys({
    workers, kekConfigured: config.caKeyEncryptionKey !== undefined, kekId: config.caKeyEncryptionKeyId, inProcess: caKeysWorkerData(config),
  });
  const pkcs11 = createPkcs11Keys({ workers, settings: config.pkcs11, log: log.child({ component: 'ca-keys' }) });
  const signer = ecdsaSignerStatus();
  if (!signer.native) {
    log.warn('the native ECDSA signer (workers/native) is not built: ECDSA keys sign through node:crypto, about 8 µs slower per signature; run npm ci with python3, make and g++ installed', { error: signer.error });
  }
  await pkcs11.start();

  return {
    generate(backend, algorithm, label) {
      return backend === 'pkcs11' ? pkcs11.generate(algorithm, label) : encrypted.generate(algorithm);
    },
    importPrivateKey: (pem) => encrypted.importPrivateKey(pem),
    sign(ref, data) {
      if (ref.backend === 'pkcs11') return pkcs11.sign(ref, data);
      if (ref.backend === 'encrypted_database') return encrypted.sign(ref, data);
      return Promise.reject(unavailable(`unknown CA key backend '${String((ref as { backend: unknown }).backend)}'`));
    },
    signInProcess(ref, data) {
      return ref.backend === 'encrypted_database' ? encrypted.signInProcess(ref, data) : null;
    },
    check(ref, owner) {
      if (ref.backend === 'pkcs11') pkcs11.check(ref, owner);
      else if (ref.backend === 'encrypted_database') encrypted.check(ref, owner);
      else throw unavailable(`${owner}: unknown CA key backend '${String((ref as { backend: unknown }).backend)}'`);
    },
    describe() {
      const p11 = pkcs11.describe();
      const open = p11.circuit !== 'closed';
      return {
        status: open ? 'degraded' : 'ok',
        ...(open ? { message: `PKCS#11 circuit ${String(p11.circuit)}` } : {}),
        provisioning_backend: config.caKeyBackend,
        encrypted_database: encrypted.describe(),
        pkcs11: p11,
      };
    },
    async close() {
      await Promise.all([encrypted.close(), pkcs11.close()]);
    },
  };
}
