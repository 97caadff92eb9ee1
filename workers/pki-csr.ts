// The CA's CSR task: reading and verifying a batch of CSRs (structure, proof of possession, key type,
// requested names) off the main thread, where it is the largest part of an issuance. Plain data in and
// out: each item answers its request or the client-facing reason it was refused.
import { readCsrDer, type CsrRequest } from '../src/pki/issuance/csr.js';

export type CsrItemResult = { ok: true; csr: CsrRequest } | { ok: false; kind: string; message: string };

export function pkiReadCsrs(input: { items: Uint8Array[] }): { ok: true; results: CsrItemResult[] } {
  return {
    ok: true,
    results: input.items.map((der) => {
      try {
        return { ok: true as const, csr: readCsrDer(Buffer.from(der.buffer, der.byteOffset, der.byteLength)) };
      } catch (err) {
        const e = err as { kind?: string; message?: string };
        // Only deliberate refusals carry their message across; anything else is an internal failure.
        return typeof e.kind === 'string' ? { ok: false as const, kind: e.kind, message: String(e.message) } : { ok: false as const, kind: 'INTERNAL', message: 'internal error' };
      }
    }),
  };
}
