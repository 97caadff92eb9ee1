// ECDSA signatures through the native signer (workers/native/ecdsa-signer.c): one OpenSSL signing context
// per key instead of one per call, about 8 µs less per P-256 signature than crypto.sign. It is built by
// `npm ci`; where it is not (a build without a C toolchain), crypto.sign does the same work and
// `ecdsaSignerStatus()` says why, for the health report and the start-up log.
import { createRequire } from 'node:module';
import { sign, type KeyObject } from 'node:crypto';

interface NativeSigner {
  create(pkcs8: Uint8Array, hash: string): object;
  sign(signer: object, data: Uint8Array): Buffer;
}

const ADDON = '../../workers/native/build/Release/ecdsa_signer.node';

let native: NativeSigner | null = null;
let loadError: string | null = null;
try {
  // From dist/workers/ (the compiled location) to the addon that stays in the source tree.
  native = createRequire(import.meta.url)(ADDON) as NativeSigner;
} catch (err) {
  loadError = (err as Error).message.split('\n')[0] ?? 'unknown error';
}

export function ecdsaSignerStatus(): { native: boolean; error?: string } {
  return native ? { native: true } : { native: false, error: loadError ?? 'not loaded' };
}

/**
 * A signing function for an EC private key: DER ECDSA-Sig-Value over `hash` of the data, the same bytes
 * crypto.sign(hash, data, key) answers. `pkcs8`: the key's DER, read here and not kept (the caller
 * zeroes it); without the native signer, or for a key it refuses, crypto.sign with `key`.
 */
export function ecdsaSigner(key: KeyObject, pkcs8: Uint8Array, hash: 'sha256' | 'sha384'): (data: Uint8Array) => Buffer {
  if (native) {
    const addon = native;
    let handle: object | undefined;
    try {
      handle = addon.create(pkcs8, hash);
    } catch {
      // node:crypto read this key; OpenSSL's DER reader should too. If not, the slower path still signs.
    }
    if (handle !== undefined) return (data) => addon.sign(handle, data);
  }
  return (data) => sign(hash, data, key);
}
