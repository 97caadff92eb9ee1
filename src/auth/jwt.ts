// ES256 JSON Web Tokens with node:crypto: compact serialisation, raw (IEEE P1363) signatures, strict
// header and claim checks. Identity and session only; never permissions.
import { sign, verify, type KeyObject } from 'node:crypto';

export interface SessionClaims {
  iss: string;
  aud: string;
  /** entity id */
  sub: string;
  /** session id */
  sid: string;
  /** tenant context chosen at login, or null */
  tid: string | null;
  iat: number;
  exp: number;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

// ECDSA signatures are malleable: (r, s) and (r, n - s) both verify. Only the low half of s is issued and
// accepted, so a session has exactly one valid token string (with the canonical base64url below), and a
// token cache or blocklist keyed by the string cannot be sidestepped by re-encoding a stolen token.
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const P256_HALF_N = P256_N >> 1n;

const toBigInt = (bytes: Buffer) => BigInt(`0x${bytes.toString('hex')}`);

/** The signature with s in the low half (n - s when it was high). */
function lowS(signature: Buffer): Buffer {
  const s = toBigInt(signature.subarray(32));
  if (s <= P256_HALF_N) return signature;
  const flipped = Buffer.from((P256_N - s).toString(16).padStart(64, '0'), 'hex');
  return Buffer.concat([signature.subarray(0, 32), flipped]);
}

export function signJwt(claims: SessionClaims, kid: string, privateKey: KeyObject): string {
  const input = `${b64url({ alg: 'ES256', typ: 'JWT', kid })}.${b64url(claims)}`;
  const signature = lowS(sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }));
  return `${input}.${signature.toString('base64url')}`;
}

export type JwtFailure = 'malformed' | 'unknown_key' | 'bad_signature' | 'bad_claims' | 'expired';

const SEGMENT = /^[A-Za-z0-9_-]+$/;
// Lowercase only, unlike validate.ts: every id this service signs is lowercase, so any other form was not issued here.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function decodeSegment(segment: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The header's kid, read before choosing a key (null when the token is not even shaped like a JWT). */
export function peekKid(token: string): string | null {
  const dot = token.indexOf('.');
  if (dot <= 0 || token.length > 4096) return null;
  const header = decodeSegment(token.slice(0, dot));
  return header && typeof header.kid === 'string' ? header.kid : null;
}

export function verifyJwt(
  token: string,
  keyFor: (kid: string) => KeyObject | undefined,
  expect: { iss: string; aud: string; now: number },
): { ok: true; claims: SessionClaims } | { ok: false; reason: JwtFailure } {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => SEGMENT.test(p))) return { ok: false, reason: 'malformed' };
  const [h, c, s] = parts as [string, string, string];
  const header = decodeSegment(h);
  // alg is pinned: a token naming another algorithm (none, HS256 with the public key...) is refused.
  if (!header || header.alg !== 'ES256' || typeof header.kid !== 'string' || (header.typ !== undefined && header.typ !== 'JWT')) {
    return { ok: false, reason: 'malformed' };
  }
  const key = keyFor(header.kid);
  if (!key) return { ok: false, reason: 'unknown_key' };
  const signature = Buffer.from(s, 'base64url');
  // 64 bytes, spelled the one way base64url spells them (no stray low bits in the last character), low S.
  if (signature.length !== 64 || signature.toString('base64url') !== s || toBigInt(signature.subarray(32)) > P256_HALF_N) {
    return { ok: false, reason: 'bad_signature' };
  }
  if (!verify('sha256', Buffer.from(`${h}.${c}`), { key, dsaEncoding: 'ieee-p1363' }, signature)) {
    return { ok: false, reason: 'bad_signature' };
  }
  const claims = decodeSegment(c);
  if (!claims) return { ok: false, reason: 'malformed' };
  const { iss, aud, sub, sid, tid, iat, exp } = claims;
  if (iss !== expect.iss || aud !== expect.aud || typeof sub !== 'string' || !UUID.test(sub)
    || typeof sid !== 'string' || !UUID.test(sid) || (tid !== null && (typeof tid !== 'string' || !UUID.test(tid)))
    || typeof iat !== 'number' || typeof exp !== 'number') {
    return { ok: false, reason: 'bad_claims' };
  }
  if (exp <= expect.now) return { ok: false, reason: 'expired' };
  return { ok: true, claims: { iss, aud, sub, sid, tid, iat, exp } };
}
