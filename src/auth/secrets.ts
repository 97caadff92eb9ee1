// Secret material at rest and in tokens: AES-256-GCM sealing under the key-encryption key, the keyed
// hash of access-token and device-key secrets, and the access-token string format.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const IV_LEN = 12;
const TAG_LEN = 16;

/** Identifies a key-encryption key without revealing it: stored next to what it sealed. */
export function kekId(kek: Buffer): string {
  return `kek:${createHash('sha256').update(kek).digest('hex').slice(0, 16)}`;
}

/** iv ‖ tag ‖ ciphertext; `aad` binds the blob to its row so blobs cannot be swapped between rows. */
export function seal(kek: Buffer, plaintext: Buffer, aad: string): Buffer {
  const iv = randomBytes(IV_LEN);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]);
}

export function unseal(kek: Buffer, blob: Buffer, aad: string): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', kek, blob.subarray(0, IV_LEN));
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(blob.subarray(IV_LEN, IV_LEN + TAG_LEN));
  return Buffer.concat([decipher.update(blob.subarray(IV_LEN + TAG_LEN)), decipher.final()]);
}

export type KeyedHash = (secret: string) => string;

/**
 * HMAC-SHA256 under the service's token key. Generated secrets carry 256 bits, so a fast hash is
 * enough; the key additionally protects caller-chosen device keys if the table leaks without the key.
 */
export function keyedHasher(key: Buffer): KeyedHash {
  return (secret) => createHmac('sha256', key).update(secret).digest('base64url');
}

export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export const ACCESS_TOKEN = /^svc_([0-9a-f]{32})_([0-9a-f]{64})$/;

export function uuidToHex(id: string): string {
  return id.replace(/-/g, '').toLowerCase();
}

export function hexToUuid(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function newAccessTokenSecret(): string {
  return randomBytes(32).toString('hex');
}

export function formatAccessToken(credentialId: string, secret: string): string {
  return `svc_${uuidToHex(credentialId)}_${secret}`;
}

export function parseAccessToken(token: string): { credentialId: string; secret: string } | null {
  const m = ACCESS_TOKEN.exec(token);
  return m ? { credentialId: hexToUuid(m[1] as string), secret: m[2] as string } : null;
}

/** Device keys: 256 random bits, URL-safe, easy to paste into a device configuration. */
export function newSharedKey(): string {
  return randomBytes(32).toString('base64url');
}

/** A caller-chosen device key needs as many bits as a guess must beat (a generated key has 256). */
export const MIN_CHOSEN_KEY_BITS = 128;

// The smallest usual alphabet that spells the key, and the bits each of its characters carries: a key
// of one case of hex digits (dashes between groups, as in a UUID, carry nothing) is counted at 4 bits a
// digit, one in base64/base64url at 6, anything else printable at log2(94). Keys written with fewer than
// 8 different characters (aaaa..., 0101...) are refused whatever their length.
const HEX = /^(?:[0-9a-f]+(?:-[0-9a-f]+)*|[0-9A-F]+(?:-[0-9A-F]+)*)$/;
const BASE64 = /^(?:[A-Za-z0-9_-]+|[A-Za-z0-9+/]+={0,2})$/;
const PRINTABLE = /^[\x21-\x7e]+$/;

/** The strength a chosen key's length and alphabet give it, in bits (0 for characters outside printable ASCII). */
export function chosenKeyBits(key: string): number {
  if (new Set(key).size < 8 || !PRINTABLE.test(key)) return 0;
  if (HEX.test(key)) return key.replace(/-/g, '').length * 4;
  if (BASE64.test(key)) return key.replace(/=+$/, '').length * 6;
  return key.length * Math.log2(94);
}

export function newOpaqueToken(): string {
  return randomBytes(32).toString('base64url');
}
