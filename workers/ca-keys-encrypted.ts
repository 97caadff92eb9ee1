// The encrypted_database CA key backend inside a worker thread: generating and importing keys (sealed
// here, so the main thread only ever sees ciphertext), unwrapping each key once and keeping it in this
// thread's memory, and signing. Layout: PKCS#8 DER sealed under a random per-key data key, the data key
// sealed under the key-encryption key; both AES-256-GCM (src/auth/secrets.ts), bound to algorithm and kekId.
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { seal, unseal } from '../src/auth/secrets.js';
import { ecdsaSigner } from './ecdsa-signer.js';
import { ALGORITHMS, algorithmOfKey, isKeyAlgorithm } from '../src/pki/keys/algorithms.js';
import type { CaKeysWorkerData, ItemResult, KeyFailure, KeyTaskOutput } from '../src/pki/keys/tasks.js';
import type { KeyAlgorithm, StoredKeyRef } from '../src/pki/keys/types.js';

type EncryptedRef = Extract<StoredKeyRef, { backend: 'encrypted_database' }>;

const dataKeyAad = (kekId: string, algorithm: string) => `pki-ca-data-key:${kekId}:${algorithm}`;
const keyAad = (algorithm: string) => `pki-ca-key:${algorithm}`;

// Authorities are few per tenant but tenants may be many: bound what one thread keeps unwrapped.
// Keyed by the wrapped data key (random per key); a hit also needs the same ciphertext and algorithm, so an
// altered reference is unwrapped (and refused) rather than served from memory.
interface Unwrapped {
  key: KeyObject;
  /** The key's signature over some data, made once per key (ECDSA through the native signer). */
  sign: (data: Uint8Array) => Buffer;
  algorithm: KeyAlgorithm;
  encryptedKey: string;
  kekId: string;
}
const unwrapped = new LRUCache<string, Unwrapped>({ max: 10_000 });

function fail(code: KeyFailure['code'], message: string): KeyFailure {
  return { ok: false, code, message };
}

function kekOf(config: CaKeysWorkerData | undefined): Buffer | KeyFailure {
  if (!config?.kek) return fail('NOT_CONFIGURED', 'SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set: the encrypted_database key backend is unavailable');
  return Buffer.from(config.kek, 'base64');
}

function sealKey(config: CaKeysWorkerData, kek: Buffer, key: KeyObject, algorithm: KeyAlgorithm): KeyTaskOutput {
  const dataKey = randomBytes(32);
  const pkcs8 = key.export({ type: 'pkcs8', format: 'der' });
  const ref: EncryptedRef = {
    backend: 'encrypted_database',
    algorithm,
    kekId: config.kekId,
    wrappedDataKey: seal(kek, dataKey, dataKeyAad(config.kekId, algorithm)).toString('base64'),
    encryptedKey: seal(dataKey, pkcs8, keyAad(algorithm)).toString('base64'),
  };
  const signWith = signerOf(key, pkcs8, algorithm);
  pkcs8.fill(0);
  dataKey.fill(0);
  unwrapped.set(ref.wrappedDataKey, { key, sign: signWith, algorithm, encryptedKey: ref.encryptedKey, kekId: ref.kekId });
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  return { ok: true, spki, ref };
}

export function generateEncrypted(config: CaKeysWorkerData | undefined, algorithm: KeyAlgorithm): KeyTaskOutput {
  const kek = kekOf(config);
  if (!Buffer.isBuffer(kek)) return kek;
  const spec = ALGORITHMS[algorithm];
  const { privateKey } =
    spec.family === 'ec' ? generateKeyPairSync('ec', { namedCurve: spec.nodeCurve })
    : spec.family === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: spec.modulusLength })
    : generateKeyPairSync('ed25519');
  return sealKey(config as CaKeysWorkerData, kek, privateKey, algorithm);
}

/** PEM PKCS#8, SEC1 ("EC PRIVATE KEY") or PKCS#1 ("RSA PRIVATE KEY"), unencrypted. */
export function importEncrypted(config: CaKeysWorkerData | undefined, pem: string): KeyTaskOutput {
  const kek = kekOf(config);
  if (!Buffer.isBuffer(kek)) return kek;
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(pem)) {
    return fail('INVALID_KEY', 'the private key PEM is passphrase-protected; give it unencrypted (PKCS#8, SEC1 or PKCS#1)');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    return fail('INVALID_KEY', `not a PEM private key (PKCS#8, SEC1 or PKCS#1): ${(err as Error).message}`);
  }
  const found = algorithmOfKey(key);
  if ('problem' in found) return fail('INVALID_KEY', found.problem);
  return sealKey(config as CaKeysWorkerData, kek, key, found.algorithm);
}

function unwrap(config: CaKeysWorkerData | undefined, ref: EncryptedRef): Unwrapped | KeyFailure {
  const cached = unwrapped.get(ref.wrappedDataKey);
  if (cached && cached.encryptedKey === ref.encryptedKey && cached.algorithm === ref.algorithm && cached.kekId === ref.kekId) return cached;
  const kek = kekOf(config);
  if (!Buffer.isBuffer(kek)) return kek;
  if (ref.kekId !== config?.kekId) {
    return fail('UNKNOWN_KEK', `the key is wrapped by key-encryption key '${ref.kekId}', but SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID is '${config?.kekId}'`);
  }
  if (!isKeyAlgorithm(ref.algorithm)) return fail('INVALID_KEY', `unknown key algorithm '${String(ref.algorithm)}'`);
  let dataKey: Buffer;
  let pkcs8: Buffer;
  try {
    dataKey = unseal(kek, Buffer.from(ref.wrappedDataKey, 'base64'), dataKeyAad(ref.kekId, ref.algorithm));
    pkcs8 = unseal(dataKey, Buffer.from(ref.encryptedKey, 'base64'), keyAad(ref.algorithm));
  } catch {
    return fail('UNWRAP_FAILED', `the key does not decrypt under key-encryption key '${ref.kekId}' (a different key under the same id, or altered key material)`);
  }
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const found = algorithmOfKey(key);
  const signWith = 'problem' in found || found.algorithm !== ref.algorithm ? null : signerOf(key, pkcs8, found.algorithm);
  pkcs8.fill(0);
  dataKey.fill(0);
  if (!signWith) return fail('INVALID_KEY', `the stored key is not the ${ref.algorithm} key its reference names`);
  const entry = { key, sign: signWith, algorithm: ref.algorithm, encryptedKey: ref.encryptedKey, kekId: ref.kekId };
  unwrapped.set(ref.wrappedDataKey, entry);
  return entry;
}

/**
 * How a key signs, decided once: ECDSA through the native signer (DER ECDSA-Sig-Value over the hash, as
 * X.509 wants); RSA PKCS#1 v1.5 and Ed25519 (raw, no hash) through crypto.sign.
 */
function signerOf(key: KeyObject, pkcs8: Uint8Array, algorithm: KeyAlgorithm): (data: Uint8Array) => Buffer {
  const spec = ALGORITHMS[algorithm];
  if (spec.family === 'ec') return ecdsaSigner(key, pkcs8, spec.hash);
  return (data) => sign(spec.hash, data, key);
}

/** Signs each item with its key; a key that cannot be unwrapped fails only its own items. */
export function signEncrypted(config: CaKeysWorkerData | undefined, keys: EncryptedRef[], items: { k: number; data: Uint8Array }[]): ItemResult[] {
  const opened = keys.map((ref) => unwrap(config, ref));
  return items.map(({ k, data }) => {
    const entry = opened[k];
    if (!entry) return fail('INVALID_KEY', `item names key ${k}, which the task does not carry`);
    if ('ok' in entry) return entry;
    return { ok: true, sig: entry.sign(data) };
  });
}

/** One signature with one key, on the calling thread (the main thread's OCSP answers): no arrays, no copies. */
export function signOneEncrypted(config: CaKeysWorkerData | undefined, ref: EncryptedRef, data: Uint8Array): Buffer | KeyFailure {
  const entry = unwrap(config, ref);
  return 'ok' in entry ? entry : entry.sign(data);
}
