// What each CA key algorithm means to Node's crypto and to PKCS#11 (curve, hash, key parameters), and
// which algorithm a parsed key is.
import type { KeyObject } from 'node:crypto';
import { KEY_ALGORITHMS, type KeyAlgorithm } from './types.js';

export type AlgorithmSpec =
  | { family: 'ec'; namedCurve: 'P-256' | 'P-384'; nodeCurve: 'prime256v1' | 'secp384r1'; hash: 'sha256' | 'sha384'; curveOidDer: Buffer }
  | { family: 'rsa'; modulusLength: 2048 | 3072 | 4096; hash: 'sha256' }
  | { family: 'ed25519'; hash: null; curveOidDer: Buffer };

export const ALGORITHMS: Record<KeyAlgorithm, AlgorithmSpec> = {
  // CKA_EC_PARAMS is the DER of the curve's OBJECT IDENTIFIER.
  'ecdsa-p256': { family: 'ec', namedCurve: 'P-256', nodeCurve: 'prime256v1', hash: 'sha256', curveOidDer: Buffer.from('06082a8648ce3d030107', 'hex') },
  'ecdsa-p384': { family: 'ec', namedCurve: 'P-384', nodeCurve: 'secp384r1', hash: 'sha384', curveOidDer: Buffer.from('06052b81040022', 'hex') },
  'rsa-2048': { family: 'rsa', modulusLength: 2048, hash: 'sha256' },
  'rsa-3072': { family: 'rsa', modulusLength: 3072, hash: 'sha256' },
  'rsa-4096': { family: 'rsa', modulusLength: 4096, hash: 'sha256' },
  // id-Ed25519 (1.3.101.112), which SoftHSM 2.6.1 accepts for CKM_EC_EDWARDS_KEY_PAIR_GEN.
  ed25519: { family: 'ed25519', hash: null, curveOidDer: Buffer.from('06032b6570', 'hex') },
};

export function isKeyAlgorithm(value: unknown): value is KeyAlgorithm {
  return typeof value === 'string' && (KEY_ALGORITHMS as readonly string[]).includes(value);
}

/** The algorithm of a parsed private or public key, or a sentence saying why it is not one we sign with. */
export function algorithmOfKey(key: KeyObject): { algorithm: KeyAlgorithm } | { problem: string } {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'ec':
      if (details.namedCurve === 'prime256v1') return { algorithm: 'ecdsa-p256' };
      if (details.namedCurve === 'secp384r1') return { algorithm: 'ecdsa-p384' };
      return { problem: `EC curve ${details.namedCurve ?? 'unknown'} is not supported (P-256 or P-384)` };
    case 'rsa': {
      const bits = details.modulusLength;
      if (bits === 2048 || bits === 3072 || bits === 4096) return { algorithm: `rsa-${bits}` };
      return { problem: `RSA keys of ${bits ?? 'unknown'} bits are not supported (2048, 3072 or 4096)` };
    }
    case 'ed25519':
      return { algorithm: 'ed25519' };
    default:
      return { problem: `key type ${key.asymmetricKeyType ?? 'unknown'} is not supported (EC P-256/P-384, RSA or Ed25519)` };
  }
}
