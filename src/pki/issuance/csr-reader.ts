// CSRs read in the worker pool: the cheap checks (size, PEM) here, then concurrent requests gathered into
// one task (the CA keys' gatherer), which parses and verifies them off the main thread.
import { AppError, type ErrorKind } from '../../errors.js';
import type { WorkerPool } from '../../worker-pool.js';
import { csrDerOf, type CsrRequest } from './csr.js';
import { createGatherer } from '../keys/gatherer.js';

type ItemResult = { ok: true; csr: CsrRequest } | { ok: false; kind: string; message: string };

export function createCsrReader(deps: { workers: WorkerPool; maxBytes: number }) {
  const gatherer = createGatherer<Uint8Array, CsrRequest>({
    maxBatch: 64,
    parallel: deps.workers.size,
    async run(items) {
      const out = await deps.workers.run<{ ok: true; results: ItemResult[] }>('pkiReadCsrs', { items });
      return out.results.map((r) => (r.ok ? r.csr : new AppError(r.kind as ErrorKind, r.message)));
    },
  });
  return {
    /** The CSR's key and requested names once verified; INVALID_INPUT / PAYLOAD_TOO_LARGE naming what is wrong. */
    read(pem: unknown): Promise<CsrRequest> {
      try {
        return gatherer.submit(csrDerOf(pem, deps.maxBytes));
      } catch (err) {
        return Promise.reject(err);
      }
    },
    close: () => gatherer.close(),
  };
}

export type CsrReader = ReturnType<typeof createCsrReader>;
