import { createPublicKey, verify } from 'node:crypto';
import pkcs11js from 'pkcs11js';
import t from 'tap';
import { isAppError } from '../../../src/errors.js';
import { KEY_ALGORITHMS, type StoredKeyRef } from '../../../src/pki/keys/index.js';
import { hashOf, newKek, opensslVerify, startCaKeys } from '../../helpers/ca-keys.js';
import { createSoftHsmToken, SOFTHSM_MODULE } from '../../helpers/softhsm.js';

type Pkcs11Ref = Extract<StoredKeyRef, { backend: 'pkcs11' }>;
const token = createSoftHsmToken(t);


/** The test's own view of the token, as an operator's tool would have it. */
function inspectToken(t: { teardown(fn: () => unknown): void }) {
  const lib = new pkcs11js.PKCS11();
  lib.load(SOFTHSM_MODULE);
  try {
    lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  } catch (err) {
    if ((err as { code?: number }).code !== pkcs11js.CKR_CRYPTOKI_ALREADY_INITIALIZED) throw err;
  }
  const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === token.label);
  if (!slot) throw new Error('token not found');
  const session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
  try {
    lib.C_Login(session, pkcs11js.CKU_USER, token.pin);
  } catch (err) {
    if ((err as { code?: number }).code !== pkcs11js.CKR_USER_ALREADY_LOGGED_IN) throw err;
  }
  t.teardown(() => lib.C_CloseSession(session));
  return {
    privateKey(keyId: string) {
      lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY }, { type: pkcs11js.CKA_ID, value: Buffer.from(keyId, 'hex') }]);
      const found = lib.C_FindObjects(session, 2);
      lib.C_FindObjectsFinal(session);
      return found;
    },
    attribute(handle: Buffer, type: number) {
      return lib.C_GetAttributeValue(session, handle, [{ type }])[0]?.value as Buffer;
    },
  };
}

// First in the file: SoftHSM checks the PIN only while no session of the process is logged in (after that a
// login answers CKR_USER_ALREADY_LOGGED_IN), as at a service's start.
t.test('a wrong PIN, token label or module stops the start with a message naming the setting', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ SVC_PKI_PKCS11_USER_PIN: '9999' }, new RegExp(`PKCS#11 token '${token.label}' refused SVC_PKI_PKCS11_USER_PIN \\(CKR_PIN_INCORRECT\\)`)],
    [{ SVC_PKI_PKCS11_TOKEN_LABEL: 'no-such-token' }, new RegExp(`no PKCS#11 token labelled 'no-such-token' \\(SVC_PKI_PKCS11_TOKEN_LABEL\\) in ${SOFTHSM_MODULE}; tokens present: '${token.label}'`)],
    [{ SVC_PKI_PKCS11_MODULE_PATH: '/nonexistent/libpkcs11.so' }, /cannot load the PKCS#11 module \/nonexistent\/libpkcs11.so \(SVC_PKI_PKCS11_MODULE_PATH\)/],
  ];
  for (const [override, message] of cases) {
    await t.rejects(startCaKeys(t, { ...token.env, ...override }, 1), message);
  }
  // The right PIN still works afterwards (a refused login does not poison the module).
  const { caKeys } = await startCaKeys(t, token.env, 1);
  const key = await caKeys.generate('pkcs11', 'ed25519', 'after refusals');
  t.ok(verify(null, Buffer.from('ok'), createPublicKey({ key: key.spki, format: 'der', type: 'spki' }), await caKeys.sign(key.ref, Buffer.from('ok'))));
});

t.test('pkcs11 on SoftHSM2: every algorithm generates on the token, signs in the workers, verifies with node:crypto and openssl', async (t) => {
  const { caKeys } = await startCaKeys(t, token.env);
  t.match(caKeys.describe(), { provisioning_backend: 'pkcs11', pkcs11: { configured: true, token_label: token.label, eddsa: true, circuit: 'closed' } });
  for (const algorithm of KEY_ALGORITHMS) {
    const key = await caKeys.generate('pkcs11', algorithm, `ca ${algorithm}`);
    const ref = key.ref as Pkcs11Ref;
    t.same(Object.keys(ref).sort(), ['algorithm', 'backend', 'keyId', 'label', 'tokenLabel'], `${algorithm}: the reference is only where the key is`);
    t.match(ref, { backend: 'pkcs11', algorithm, tokenLabel: token.label, label: `ca ${algorithm}`, keyId: /^[0-9a-f]{32}$/ });
    const pub = createPublicKey({ key: key.spki, format: 'der', type: 'spki' });
    const data = Buffer.from(`to be signed by ${algorithm} on the token`);
    const sig = await caKeys.sign(ref, data);
    t.ok(verify(hashOf(algorithm), data, pub, sig), `${algorithm}: node:crypto verifies`);
    t.match(opensslVerify(key.spki, algorithm, data, sig), /Verified OK|Signature Verified Successfully/, `${algorithm}: openssl verifies`);
  }
});

t.test('the private key stays on the token: sensitive, never extractable, CKA_VALUE unreadable', async (t) => {
  const { caKeys } = await startCaKeys(t, token.env);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'non-extractable');
  const view = inspectToken(t);
  const found = view.privateKey((key.ref as Pkcs11Ref).keyId);
  t.equal(found.length, 1, 'exactly one private key carries the CKA_ID');
  const handle = found[0] as Buffer;
  const flag = (type: number) => view.attribute(handle, type)[0] === 1;
  t.ok(flag(pkcs11js.CKA_TOKEN), 'a token object');
  t.ok(flag(pkcs11js.CKA_PRIVATE), 'private');
  t.ok(flag(pkcs11js.CKA_SENSITIVE), 'sensitive');
  t.notOk(flag(pkcs11js.CKA_EXTRACTABLE), 'not extractable');
  t.ok(flag(pkcs11js.CKA_NEVER_EXTRACTABLE), 'never was extractable');
  t.equal(view.attribute(handle, pkcs11js.CKA_LABEL).toString(), 'non-extractable');
  t.throws(() => view.attribute(handle, pkcs11js.CKA_VALUE), /CKR_ATTRIBUTE_SENSITIVE/, 'the private value cannot be read');
});

t.test('ECDSA signatures from the token are valid DER whatever the top bits of r and s', async (t) => {
  const { caKeys } = await startCaKeys(t, { ...token.env, SVC_PKI_PKCS11_MAX_IN_FLIGHT: '300' });
  for (const algorithm of ['ecdsa-p256', 'ecdsa-p384'] as const) {
    const key = await caKeys.generate('pkcs11', algorithm, `der ${algorithm}`);
    const pub = createPublicKey({ key: key.spki, format: 'der', type: 'spki' });
    const data = Array.from({ length: 300 }, (_, i) => Buffer.from(`tbs ${i}`));
    const sigs = await Promise.all(data.map((d) => caKeys.sign(key.ref, d)));
    // About half of r and s have their top bit set (a 0x00 is prepended), ~1/256 start with a zero byte.
    const lengths = new Set(sigs.map((s) => s.length));
    t.ok(lengths.size > 1, `${algorithm}: DER lengths vary (${[...lengths].join(', ')})`);
    t.ok(sigs.every((s, i) => verify(hashOf(algorithm), data[i] as Buffer, pub, s)), `${algorithm}: all 300 verify`);
    t.ok(sigs.every((s, i) => verify(hashOf(algorithm), data[i] as Buffer, { key: pub, dsaEncoding: 'der' }, s)), 'strict DER');
  }
});

t.test('concurrent signs on both backends share worker tasks; each answer is its own', async (t) => {
  const { caKeys, workers } = await startCaKeys(t, { ...token.env, SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek(), SVC_PKI_PKCS11_MAX_IN_FLIGHT: '256' });
  const onToken = await caKeys.generate('pkcs11', 'ecdsa-p256', 'batch a');
  const onToken2 = await caKeys.generate('pkcs11', 'rsa-2048', 'batch b');
  const inDb = await caKeys.generate('encrypted_database', 'ecdsa-p256', 'batch c');
  const keys = [onToken, onToken2, inDb];
  const before = workers.stats.completed;
  const n = 300;
  const data = Array.from({ length: n }, (_, i) => Buffer.from(`item ${i}`));
  const sigs = await Promise.all(data.map((d, i) => caKeys.sign((keys[i % 3] as typeof onToken).ref, d)));
  const tasks = workers.stats.completed - before;
  t.ok(tasks <= n / 5, `${n} signatures over 3 keys and 2 backends took ${tasks} worker tasks`);
  const p11 = caKeys.describe().pkcs11 as { sign_tasks: number; signatures: number; in_flight: number };
  t.equal(p11.in_flight, 0, 'nothing left in flight');
  t.ok(sigs.every((s, i) => {
    const key = keys[i % 3] as typeof onToken;
    return verify('sha256', data[i] as Buffer, createPublicKey({ key: key.spki, format: 'der', type: 'spki' }), s);
  }), 'every item verifies under its own key');
});

t.test('check(): a key on another token, or PKCS#11 not configured, is refused naming the owner', async (t) => {
  const { caKeys } = await startCaKeys(t, token.env);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'checked');
  t.doesNotThrow(() => caKeys.check(key.ref, 'authority 1'));
  const elsewhere = { ...(key.ref as Pkcs11Ref), tokenLabel: 'other-hsm' };
  t.throws(() => caKeys.check(elsewhere, "authority 'acme intermediate'"), /authority 'acme intermediate': its key is on PKCS#11 token 'other-hsm', but SVC_PKI_PKCS11_TOKEN_LABEL is '.+'/);
  const err = await caKeys.sign(elsewhere, Buffer.from('x')).catch((e: unknown) => e);
  t.ok(isAppError(err) && err.kind === 'UNAVAILABLE');

  const none = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() }, 1);
  t.throws(() => none.caKeys.check(key.ref, 'authority 2'), /authority 2: its key is on PKCS#11 token '.+', but SVC_PKI_PKCS11_MODULE_PATH, _TOKEN_LABEL and _USER_PIN are not all set/);
  const err2 = await none.caKeys.generate('pkcs11', 'ecdsa-p256', 'x').catch((e: unknown) => e);
  t.ok(isAppError(err2) && err2.kind === 'UNAVAILABLE' && /not all set/.test(err2.message));

  const missing = { ...(key.ref as Pkcs11Ref), keyId: '00'.repeat(16) };
  const err3 = await caKeys.sign(missing, Buffer.from('x')).catch((e: unknown) => e);
  t.ok(isAppError(err3) && /no private key with CKA_ID 0{32}/.test(err3.message), (err3 as Error).message);
});
