// ECDSA signature re-encoding for PKCS#11 (kept apart so threads that never use a token skip the ASN.1 schemas).
import { ECDSASigValue } from '@peculiar/asn1-ecc';
import { AsnConvert } from '@peculiar/asn1-schema';

/** An unsigned big-endian integer as DER INTEGER content: no superfluous leading zeros, a 0x00 before a set top bit. */
function positiveInteger(bytes: Buffer): ArrayBuffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const trimmed = bytes.subarray(i);
  const out = (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.alloc(1), trimmed]) : Buffer.from(trimmed);
  return out.buffer.slice(out.byteOffset, out.byteOffset + out.length) as ArrayBuffer;
}

/** CKM_ECDSA answers r‖s (IEEE P1363); X.509 carries ECDSA-Sig-Value, a DER SEQUENCE of two INTEGERs. */
export function ecdsaP1363ToDer(raw: Buffer): Buffer {
  const half = raw.length / 2;
  const value = new ECDSASigValue({ r: positiveInteger(raw.subarray(0, half)), s: positiveInteger(raw.subarray(half)) });
  return Buffer.from(AsnConvert.serialize(value));
}
