// Password hashing: scrypt (memory-hard, node:crypto's async form runs in libuv's thread pool, off the
// event loop), self-describing encoding, constant-time comparison, and a dummy hash for unknown users.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export interface ScryptParams {
  cost: number;
  blockSize: number;
  parallelization: number;
}

const KEY_LEN = 32;
const SALT_LEN = 16;
// $scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt b64>$<hash b64>  (PHC string format)
const ENCODED = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,3}),p=(\d{1,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

function derive(password: string, salt: Buffer, p: ScryptParams, keyLen: number): Promise<Buffer> {
  const options: ScryptOptions = {
    N: p.cost,
    r: p.blockSize,
    p: p.parallelization,
    // Node refuses above 32 MiB by default; the real need is 128·N·r·p plus a little.
    maxmem: 128 * p.cost * p.blockSize * p.parallelization + 1024 * 1024,
  };
  return new Promise((resolve, reject) => {
    scryptCb(password.normalize('NFC'), salt, keyLen, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string, params: ScryptParams): Promise<string> {
  const salt = randomBytes(SALT_LEN);
  const key = await derive(password, salt, params, KEY_LEN);
  const ln = Math.log2(params.cost);
  return `$scrypt$ln=${ln},r=${params.blockSize},p=${params.parallelization}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export function parseHash(encoded: string): { params: ScryptParams; salt: Buffer; key: Buffer } | null {
  const m = ENCODED.exec(encoded);
  if (!m) return null;
  const ln = Number(m[1]);
  if (ln < 1 || ln > 24) return null;
  return {
    params: { cost: 2 ** ln, blockSize: Number(m[2]), parallelization: Number(m[3]) },
    salt: Buffer.from(m[4] as string, 'base64'),
    key: Buffer.from(m[5] as string, 'base64'),
  };
}

/** True when the password matches; a malformed stored hash never matches. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = parseHash(encoded);
  if (!parsed || parsed.key.length === 0) return false;
  const key = await derive(password, parsed.salt, parsed.params, parsed.key.length);
  return timingSafeEqual(key, parsed.key);
}

/**
 * verifyPassword, answering no sooner than a check of `reference` (a hash at today's parameters) would
 * when `encoded` was made with other parameters or does not parse: the two checks run side by side in
 * the thread pool. An unknown identifier costs one check at today's parameters (the dummy hash); without
 * this, an account whose hash predates a cost increase would fail measurably faster, and dormant accounts
 * could be told apart by timing. Waiting for a separate top-up instead would not match: scrypt's time grows
 * faster than N once its memory outgrows the caches (N = 32768 at r = 8 takes 4× the time of 16384 here).
 */
export async function verifyPaced(password: string, encoded: string, reference: string): Promise<boolean> {
  const check = verifyPassword(password, encoded);
  const today = parseHash(reference)?.params;
  if (today && !needsRehash(encoded, today)) return check;
  const [ok] = await Promise.all([check, verifyPassword(password, reference)]);
  return ok;
}

/** A stored hash made with other parameters than today's is upgraded after the next good login. */
export function needsRehash(encoded: string, params: ScryptParams): boolean {
  const parsed = parseHash(encoded);
  return !parsed || parsed.params.cost !== params.cost || parsed.params.blockSize !== params.blockSize
    || parsed.params.parallelization !== params.parallelization || parsed.key.length !== KEY_LEN;
}

export function checkPasswordPolicy(password: string, minChars: number): string | null {
  // Code points, not UTF-16 units: an emoji is one character to the user.
  if ([...password].length < minChars) return `password must be at least ${minChars} characters`;
  if (password.length > 1024) return 'password must be at most 1024 characters';
  return null;
}
