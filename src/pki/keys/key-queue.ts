// Admission of the CA's own token operations: CaKeys refuses PKCS#11 operations beyond
// SVC_PKI_PKCS11_MAX_IN_FLIGHT (RATE_LIMITED), which protects the token; a burst of issuances should wait
// for a slot instead of failing, the way a connection pool queues. So at most that many PKCS#11 operations
// of this service are outstanding and the others wait in order, up to a bound (beyond it: RATE_LIMITED
// too). Encrypted-database keys pass straight through.
import { rateLimited } from '../../errors.js';
import type { CaKeys, KeyAlgorithm, KeyBackendKind, StoredKeyRef } from './types.js';

export function queuedKeys(keys: CaKeys, options: { pkcs11InFlight: number; maxWaiting: number }): CaKeys {
  let active = 0;
  const waiting: (() => void)[] = [];

  /** A slot, now or when one is handed over; the holder must call release() exactly once. */
  function acquire(): Promise<void> {
    if (active < options.pkcs11InFlight) {
      active++;
      return Promise.resolve();
    }
    if (waiting.length >= options.maxWaiting) {
      return Promise.reject(rateLimited(1, `too many PKCS#11 operations waiting (${options.maxWaiting}); retry shortly`));
    }
    return new Promise<void>((resolve) => waiting.push(resolve));
  }

  /** Hands the slot to the next waiter directly, so an arrival in between cannot take it and overshoot. */
  function release(): void {
    const next = waiting.shift();
    if (next) next();
    else active--;
  }

  async function throughQueue<T>(backend: KeyBackendKind, op: () => Promise<T>): Promise<T> {
    if (backend !== 'pkcs11') return op();
    await acquire();
    try {
      return await op();
    } finally {
      release();
    }
  }

  return {
    generate: (backend: KeyBackendKind, algorithm: KeyAlgorithm, label: string) => throughQueue(backend, () => keys.generate(backend, algorithm, label)),
    importPrivateKey: (pem: string) => keys.importPrivateKey(pem),
    sign: (ref: StoredKeyRef, data: Buffer) => throughQueue(ref.backend, () => keys.sign(ref, data)),
    // Encrypted-database keys only: nothing reaches the token, so nothing to admit.
    signInProcess: (ref: StoredKeyRef, data: Buffer) => keys.signInProcess(ref, data),
    check: (ref: StoredKeyRef, owner: string) => keys.check(ref, owner),
    describe: () => ({ ...keys.describe(), pkcs11_waiting: waiting.length }),
    close: () => keys.close(),
  };
}
