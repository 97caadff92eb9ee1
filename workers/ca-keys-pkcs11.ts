// The pkcs11 CA key backend inside a worker thread: one PKCS#11 session per thread, keys generated on the
// token (non-extractable), signing with retries on transient CKR codes. Signing calls are synchronous: the
// *Async ones cost two thread wake-ups each (measured: 5x the CPU per signature with SoftHSM2). The main
// thread times them out by watching the progress counter this thread bumps before each attempt, and
// stops a thread stuck in the token. Key generation (seconds, rare) runs async with its own timeout.
import { createHash, createPublicKey, randomBytes, type JsonWebKey } from 'node:crypto';
import { OctetString, AsnConvert } from '@peculiar/asn1-schema';
import pkcs11js from 'pkcs11js';
import { ALGORITHMS } from '../src/pki/keys/algorithms.js';
import { ecdsaP1363ToDer } from '../src/pki/keys/ecdsa-signature.js';
import type { CaKeysWorkerData, ItemResult, KeyFailure, KeyTaskOutput, OpenTaskOutput } from '../src/pki/keys/tasks.js';
import type { KeyAlgorithm, StoredKeyRef } from '../src/pki/keys/types.js';

type Pkcs11Ref = Extract<StoredKeyRef, { backend: 'pkcs11' }>;
type Handle = Buffer;
type Settings = NonNullable<CaKeysWorkerData['pkcs11']>;

// Not among pkcs11js's constants (PKCS#11 3.0 names); SoftHSM 2.6.1 has both.
const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;
const CKM_EDDSA = 0x1057;
/** Key generation may take seconds (RSA-4096 on a busy token): it gets at least this long. */
const GENERATE_MIN_TIMEOUT_MS = 60_000;

/** Failures worth another attempt on a fresh session: the session, the login or the device hiccuped. */
const TRANSIENT = new Set([
  'CKR_SESSION_HANDLE_INVALID', 'CKR_SESSION_CLOSED', 'CKR_USER_NOT_LOGGED_IN', 'CKR_OPERATION_ACTIVE',
  'CKR_OPERATION_NOT_INITIALIZED', 'CKR_SESSION_COUNT', 'CKR_DEVICE_ERROR', 'CKR_DEVICE_MEMORY', 'CKR_DEVICE_REMOVED',
  'CKR_TOKEN_NOT_PRESENT', 'CKR_FUNCTION_FAILED', 'CKR_FUNCTION_CANCELED', 'CKR_CANT_LOCK',
  // A cached object handle gone stale (token re-initialised under us): look the key up again.
  'CKR_KEY_HANDLE_INVALID', 'CKR_OBJECT_HANDLE_INVALID',
]);

interface Token {
  lib: pkcs11js.PKCS11;
  settings: Settings;
  slot: Handle;
  session: Handle | null;
  /** CKA_ID (hex) → private key handle; token-object handles outlive sessions. */
  handles: Map<string, Handle>;
  eddsa: boolean;
}

let token: Token | null = null;

const fail = (code: KeyFailure['code'], message: string): KeyFailure => ({ ok: false, code, message });
const ckr = (err: unknown): string => (err instanceof Error && /^CKR_\w+$/.test(err.message) ? err.message : (err as Error)?.message ?? String(err));

function tryIgnoring(fn: () => void, ...ignored: number[]): void {
  try {
    fn();
  } catch (err) {
    if (!ignored.includes((err as { code?: number }).code ?? -1)) throw err;
  }
}

function openSession(t: Token): Handle {
  const session = t.lib.C_OpenSession(t.slot, pkcs11js.CKF_RW_SESSION | pkcs11js.CKF_SERIAL_SESSION);
  try {
    // Login state is per application: the second thread's login answers USER_ALREADY_LOGGED_IN, harmless.
    tryIgnoring(() => t.lib.C_Login(session, pkcs11js.CKU_USER, t.settings.userPin), pkcs11js.CKR_USER_ALREADY_LOGGED_IN);
  } catch (err) {
    tryIgnoring(() => t.lib.C_CloseSession(session), pkcs11js.CKR_SESSION_HANDLE_INVALID, pkcs11js.CKR_SESSION_CLOSED);
    throw err;
  }
  return session;
}

function dropSession(t: Token): void {
  const session = t.session;
  t.session = null;
  if (session) {
    try {
      t.lib.C_CloseSession(session);
    } catch {
      // Already gone with the device or the login: nothing to release.
    }
  }
}

/** This thread's token, opened on first use; a failure leaves nothing behind so the next call tries again. */
export function openToken(config: CaKeysWorkerData | undefined): Token | KeyFailure {
  if (token) return token;
  const settings = config?.pkcs11;
  if (!settings) return fail('NOT_CONFIGURED', 'SVC_PKI_PKCS11_MODULE_PATH, _TOKEN_LABEL and _USER_PIN are not all set: the pkcs11 key backend is unavailable');
  const lib = new pkcs11js.PKCS11();
  try {
    lib.load(settings.modulePath);
  } catch (err) {
    return fail('OPEN_FAILED', `cannot load the PKCS#11 module ${settings.modulePath} (SVC_PKI_PKCS11_MODULE_PATH): ${(err as Error).message}`);
  }
  try {
    // OS locking, or concurrent signing from several threads crashes; a second thread finds it initialised.
    tryIgnoring(() => lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK }), pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED);
    const labels: string[] = [];
    let slot: Handle | undefined;
    for (const s of lib.C_GetSlotList(true)) {
      const label = lib.C_GetTokenInfo(s).label.trim();
      labels.push(label);
      if (label === settings.tokenLabel && !slot) slot = s;
    }
    if (!slot) {
      lib.close();
      return fail('OPEN_FAILED', `no PKCS#11 token labelled '${settings.tokenLabel}' (SVC_PKI_PKCS11_TOKEN_LABEL) in ${settings.modulePath}; tokens present: ${labels.map((l) => `'${l}'`).join(', ') || 'none'}`);
    }
    const t: Token = { lib, settings, slot, session: null, handles: new Map(), eddsa: lib.C_GetMechanismList(slot).includes(CKM_EDDSA) };
    try {
      t.session = openSession(t);
    } catch (err) {
      lib.close();
      const code = ckr(err);
      const pin = code === 'CKR_PIN_INCORRECT' || code === 'CKR_PIN_LOCKED' || code === 'CKR_PIN_EXPIRED' || code === 'CKR_PIN_INVALID';
      return fail('OPEN_FAILED', pin
        ? `PKCS#11 token '${settings.tokenLabel}' refused SVC_PKI_PKCS11_USER_PIN (${code})`
        : `cannot open a session on PKCS#11 token '${settings.tokenLabel}': ${code}`);
    }
    token = t;
    return t;
  } catch (err) {
    lib.close();
    return fail('OPEN_FAILED', `PKCS#11 module ${settings.modulePath} failed to start: ${ckr(err)}`);
  }
}

export function openTask(config: CaKeysWorkerData | undefined): OpenTaskOutput {
  const t = openToken(config);
  return 'ok' in t ? t : { ok: true, tokenLabel: t.settings.tokenLabel, eddsa: t.eddsa };
}

const TIMEOUT = Symbol('timeout');

/**
 * Races an async token call (key generation) against the timeout. On timeout the session is abandoned (another call on it would
 * meet CKR_OPERATION_ACTIVE or run concurrently with the hung one) and closed once the call returns.
 */
async function timed<T>(t: Token, call: Promise<T>, ms: number): Promise<T | typeof TIMEOUT> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<typeof TIMEOUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMEOUT), ms);
  });
  const result = await Promise.race([call, expired]).finally(() => clearTimeout(timer));
  if (result === TIMEOUT) {
    const session = t.session;
    t.session = null;
    const close = () => tryIgnoring(() => session && t.lib.C_CloseSession(session), pkcs11js.CKR_SESSION_HANDLE_INVALID, pkcs11js.CKR_SESSION_CLOSED);
    call.then(close, close);
  }
  return result;
}

function session(t: Token): Handle {
  return (t.session ??= openSession(t));
}

function findKey(t: Token, keyId: string): Handle | null {
  const known = t.handles.get(keyId);
  if (known) return known;
  const s = session(t);
  t.lib.C_FindObjectsInit(s, [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
    { type: pkcs11js.CKA_ID, value: Buffer.from(keyId, 'hex') },
  ]);
  try {
    const found = t.lib.C_FindObjects(s, 1)[0] ?? null;
    if (found) t.handles.set(keyId, found);
    return found;
  } finally {
    t.lib.C_FindObjectsFinal(s);
  }
}

function signatureLength(algorithm: KeyAlgorithm): number {
  const spec = ALGORITHMS[algorithm];
  if (spec.family === 'rsa') return spec.modulusLength / 8;
  return spec.family === 'ec' && spec.namedCurve === 'P-384' ? 96 : 64;
}

function signOne(t: Token, ref: Pkcs11Ref, data: Buffer, maxRetries: number, progress: Int32Array | null): ItemResult {
  const spec = ALGORITHMS[ref.algorithm];
  if (!spec) return fail('INVALID_KEY', `unknown key algorithm '${String(ref.algorithm)}'`);
  if (spec.family === 'ed25519' && !t.eddsa) return fail('UNSUPPORTED', `PKCS#11 token '${t.settings.tokenLabel}' does not offer CKM_EDDSA`);
  // ECDSA: the token signs a digest made here and answers r‖s; RSA and EdDSA hash on the token.
  const mechanism = spec.family === 'ec' ? pkcs11js.CKM_ECDSA : spec.family === 'rsa' ? pkcs11js.CKM_SHA256_RSA_PKCS : CKM_EDDSA;
  const input = spec.family === 'ec' ? createHash(spec.hash).update(data).digest() : data;
  for (let attempt = 0; ; attempt++) {
    if (progress) Atomics.add(progress, 0, 1);
    try {
      const key = findKey(t, ref.keyId);
      if (!key) return fail('KEY_NOT_FOUND', `no private key with CKA_ID ${ref.keyId} ('${ref.label}') on PKCS#11 token '${t.settings.tokenLabel}'`);
      const s = session(t);
      t.lib.C_SignInit(s, { mechanism }, key);
      const out = t.lib.C_Sign(s, input, Buffer.alloc(signatureLength(ref.algorithm)));
      return { ok: true, sig: spec.family === 'ec' ? ecdsaP1363ToDer(out) : out };
    } catch (err) {
      const code = ckr(err);
      if (TRANSIENT.has(code) && attempt < maxRetries) {
        dropSession(t);
        if (code === 'CKR_KEY_HANDLE_INVALID' || code === 'CKR_OBJECT_HANDLE_INVALID') t.handles.delete(ref.keyId);
        continue;
      }
      const tries = attempt > 0 ? ` after ${attempt + 1} attempts` : '';
      return fail('TOKEN_ERROR', `PKCS#11 signing on token '${t.settings.tokenLabel}' failed${tries}: ${code}`);
    }
  }
}

/** Signs the items in order on this thread's session, publishing progress for the main thread's watchdog. */
export function signPkcs11(config: CaKeysWorkerData | undefined, keys: Pkcs11Ref[], items: { k: number; data: Uint8Array }[], maxRetries: number, shared?: SharedArrayBuffer): ItemResult[] {
  const progress = shared ? new Int32Array(shared) : null;
  if (progress) Atomics.add(progress, 0, 1);
  const t = openToken(config);
  if ('ok' in t) return items.map((_, i) => (i === 0 ? t : fail('SKIPPED', t.message)));
  return items.map(({ k, data }, i) => {
    if (progress) Atomics.store(progress, 1, i);
    const ref = keys[k];
    if (!ref) return fail('INVALID_KEY', `item names key ${k}, which the task does not carry`);
    if (ref.tokenLabel !== t.settings.tokenLabel) return fail('KEY_NOT_FOUND', `the key is on PKCS#11 token '${ref.tokenLabel}', but SVC_PKI_PKCS11_TOKEN_LABEL is '${t.settings.tokenLabel}'`);
    return signOne(t, ref, Buffer.from(data.buffer, data.byteOffset, data.byteLength), maxRetries, progress);
  });
}

const b64u = (b: Buffer) => b.toString('base64url');

/** CKA_EC_POINT is a DER OCTET STRING around the point on most tokens, the bare point on a few. */
function ecPoint(value: Buffer, rawLength: number): Buffer {
  return value.length === rawLength ? value : Buffer.from(AsnConvert.parse(value, OctetString).buffer);
}

function publicSpki(t: Token, s: Handle, publicKey: Handle, algorithm: KeyAlgorithm): Buffer {
  const spec = ALGORITHMS[algorithm];
  const attr = (type: number) => t.lib.C_GetAttributeValue(s, publicKey, [{ type }])[0]?.value as Buffer;
  let jwk: JsonWebKey;
  if (spec.family === 'rsa') {
    jwk = { kty: 'RSA', n: b64u(attr(pkcs11js.CKA_MODULUS)), e: b64u(attr(pkcs11js.CKA_PUBLIC_EXPONENT)) };
  } else if (spec.family === 'ec') {
    const size = spec.namedCurve === 'P-256' ? 32 : 48;
    const point = ecPoint(attr(pkcs11js.CKA_EC_POINT), 1 + 2 * size);
    jwk = { kty: 'EC', crv: spec.namedCurve, x: b64u(point.subarray(1, 1 + size)), y: b64u(point.subarray(1 + size)) };
  } else {
    jwk = { kty: 'OKP', crv: 'Ed25519', x: b64u(ecPoint(attr(pkcs11js.CKA_EC_POINT), 32)) };
  }
  return createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'der' });
}

/** A key pair generated on the token: the private half sensitive and never extractable; its CKA_ID random. */
export async function generatePkcs11(config: CaKeysWorkerData | undefined, algorithm: KeyAlgorithm, label: string, timeoutMs: number): Promise<KeyTaskOutput> {
  const t = openToken(config);
  if ('ok' in t) return t;
  const spec = ALGORITHMS[algorithm];
  if (spec.family === 'ed25519' && !t.eddsa) return fail('UNSUPPORTED', `PKCS#11 token '${t.settings.tokenLabel}' does not offer CKM_EDDSA: Ed25519 keys cannot be kept on it`);
  const id = randomBytes(16);
  const common = [
    { type: pkcs11js.CKA_TOKEN, value: true },
    { type: pkcs11js.CKA_ID, value: id },
    { type: pkcs11js.CKA_LABEL, value: label },
  ];
  const publicTemplate = [...common, { type: pkcs11js.CKA_VERIFY, value: true }, { type: pkcs11js.CKA_PRIVATE, value: false }];
  if (spec.family === 'rsa') {
    publicTemplate.push({ type: pkcs11js.CKA_MODULUS_BITS, value: spec.modulusLength as never }, { type: pkcs11js.CKA_PUBLIC_EXPONENT, value: Buffer.from([1, 0, 1]) as never });
  } else {
    publicTemplate.push({ type: pkcs11js.CKA_EC_PARAMS, value: spec.curveOidDer as never });
  }
  const privateTemplate = [
    ...common,
    { type: pkcs11js.CKA_PRIVATE, value: true },
    { type: pkcs11js.CKA_SENSITIVE, value: true },
    { type: pkcs11js.CKA_EXTRACTABLE, value: false },
    { type: pkcs11js.CKA_SIGN, value: true },
  ];
  const mechanism = spec.family === 'rsa' ? pkcs11js.CKM_RSA_PKCS_KEY_PAIR_GEN : spec.family === 'ec' ? pkcs11js.CKM_EC_KEY_PAIR_GEN : CKM_EC_EDWARDS_KEY_PAIR_GEN;
  const ms = Math.max(timeoutMs, GENERATE_MIN_TIMEOUT_MS);
  try {
    const s = session(t);
    const pair = await timed(t, t.lib.C_GenerateKeyPairAsync(s, { mechanism }, publicTemplate, privateTemplate), ms);
    if (pair === TIMEOUT) return fail('TIMEOUT', `PKCS#11 token '${t.settings.tokenLabel}' did not generate a key within ${ms} ms`);
    const spki = publicSpki(t, session(t), pair.publicKey, algorithm);
    const keyId = id.toString('hex');
    t.handles.set(keyId, pair.privateKey);
    const ref: Pkcs11Ref = { backend: 'pkcs11', algorithm, tokenLabel: t.settings.tokenLabel, keyId, label };
    return { ok: true, spki, ref };
  } catch (err) {
    dropSession(t);
    return fail('TOKEN_ERROR', `PKCS#11 key generation on token '${t.settings.tokenLabel}' failed: ${ckr(err)}`);
  }
}
