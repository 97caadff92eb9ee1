import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import t from 'tap';
import { isAppError } from '../../../src/errors.js';
import { KEY_ALGORITHMS, type KeyAlgorithm, type StoredKeyRef } from '../../../src/pki/keys/index.js';
import { hashOf, newKek, opensslVerify, startCaKeys } from '../../helpers/ca-keys.js';



t.test('encrypted_database: every algorithm generates, signs in the workers, verifies with node:crypto and openssl', async (t) => {
  const { caKeys } = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() });
  for (const algorithm of KEY_ALGORITHMS) {
    const key = await caKeys.generate('encrypted_database', algorithm, `test ${algorithm}`);
    t.equal(key.ref.backend, 'encrypted_database');
    t.equal(key.ref.algorithm, algorithm);
    const pub = createPublicKey({ key: key.spki, format: 'der', type: 'spki' });
    const data = Buffer.from(`to be signed by ${algorithm}`);
    const sig = await caKeys.sign(key.ref, data);
    t.ok(verify(hashOf(algorithm), data, pub, sig), `${algorithm}: node:crypto verifies`);
    t.match(opensslVerify(key.spki, algorithm, data, sig), /Verified OK|Signature Verified Successfully/, `${algorithm}: openssl verifies`);
    t.notOk(verify(hashOf(algorithm), Buffer.from('other data'), pub, sig), `${algorithm}: the signature is bound to its data`);
  }
});

t.test('the reference holds no private key in the clear and decrypts only with its key-encryption key', async (t) => {
  const kek = newKek();
  const { caKeys } = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: kek, SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'test:v7' });
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const key = await caKeys.importPrivateKey(privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  const ref = key.ref as Extract<StoredKeyRef, { backend: 'encrypted_database' }>;
  t.equal(ref.kekId, 'test:v7', 'the key id in force is stored on the reference');
  const json = JSON.stringify(ref);
  t.same(JSON.parse(json), ref, 'the reference is plain JSON');
  const raw = Buffer.concat([Buffer.from(ref.encryptedKey, 'base64'), Buffer.from(ref.wrappedDataKey, 'base64')]);
  // The private scalar sits in the PKCS#8 DER; neither it nor the DER appears in the stored bytes or the JSON.
  const scalar = privateKey.export({ format: 'jwk' }).d as string;
  t.equal(raw.indexOf(pkcs8.subarray(pkcs8.length - 80)), -1, 'no PKCS#8 bytes in the ciphertexts');
  t.notOk(json.includes(scalar) || json.includes(pkcs8.toString('base64').slice(40, 120)), 'no key material in the JSON');

  // Altered references do not unwrap, even for a key the worker already holds in memory.
  const cipher = Buffer.from(ref.encryptedKey, 'base64');
  cipher[20] = (cipher[20] as number) ^ 1;
  const altered: StoredKeyRef[] = [
    { ...ref, encryptedKey: cipher.toString('base64') },
    { ...ref, algorithm: 'ecdsa-p384' },
  ];
  for (const bad of altered) {
    const err = await caKeys.sign(bad, Buffer.from('x')).catch((e: unknown) => e);
    t.ok(isAppError(err) && err.kind === 'UNAVAILABLE' && /does not decrypt/.test(err.message), `refused: ${(err as Error).message}`);
  }
  const data = Buffer.from('still fine');
  t.ok(verify('sha256', data, privateKey, await caKeys.sign(ref, data)), 'the genuine reference still signs');
});

t.test('import: PKCS#8, SEC1 and PKCS#1 PEM; the signature verifies under the imported public key', async (t) => {
  const { caKeys } = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() });
  const ec = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const ed = generateKeyPairSync('ed25519');
  const cases: [string, string, KeyAlgorithm, ReturnType<typeof generateKeyPairSync>['publicKey']][] = [
    ['SEC1', ec.privateKey.export({ type: 'sec1', format: 'pem' }) as string, 'ecdsa-p384', ec.publicKey],
    ['PKCS#8 EC', ec.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'ecdsa-p384', ec.publicKey],
    ['PKCS#1', rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string, 'rsa-2048', rsa.publicKey],
    ['PKCS#8 Ed25519', ed.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'ed25519', ed.publicKey],
  ];
  for (const [name, pem, algorithm, pub] of cases) {
    t.match(pem, /-----BEGIN (EC |RSA )?PRIVATE KEY-----/);
    const key = await caKeys.importPrivateKey(pem);
    t.equal(key.ref.algorithm, algorithm, `${name}: algorithm recognised`);
    t.same(key.spki, pub.export({ type: 'spki', format: 'der' }), `${name}: same public key`);
    const data = Buffer.from(name);
    t.ok(verify(hashOf(algorithm), data, pub, await caKeys.sign(key.ref, data)), `${name}: signs with the imported key`);
  }
  const refused: [string, string, RegExp][] = [
    ['garbage', 'not a key', /not a PEM private key/],
    ['P-521', generateKeyPairSync('ec', { namedCurve: 'secp521r1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, /secp521r1 is not supported/],
    ['RSA-1024', generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }) as string, /1024 bits are not supported/],
    ['encrypted', ec.privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' }) as string, /passphrase-protected/],
  ];
  for (const [name, pem, message] of refused) {
    const err = await caKeys.importPrivateKey(pem).catch((e: unknown) => e);
    t.ok(isAppError(err) && err.kind === 'INVALID_INPUT', `${name}: INVALID_INPUT`);
    t.match((err as Error).message, message, `${name}: says why`);
  }
});

t.test('concurrent signs share worker tasks', async (t) => {
  const { caKeys, workers } = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() });
  const a = await caKeys.generate('encrypted_database', 'ecdsa-p256', 'a');
  const b = await caKeys.generate('encrypted_database', 'ed25519', 'b');
  const before = workers.stats.completed;
  const n = 400;
  const data = Array.from({ length: n }, (_, i) => Buffer.from(`item ${i}`));
  const sigs = await Promise.all(data.map((d, i) => caKeys.sign(i % 2 ? b.ref : a.ref, d)));
  const tasks = workers.stats.completed - before;
  const d = caKeys.describe().encrypted_database as { sign_tasks: number; signatures: number; ecdsa_signer: string };
  t.equal(d.ecdsa_signer, 'native', 'ECDSA keys sign through the native signer (npm ci built it)');
  t.ok(tasks <= n / 8, `${n} signatures took ${tasks} worker tasks`);
  t.ok(d.sign_tasks <= n / 8 && d.signatures >= n, `gatherer: ${d.signatures} signatures in ${d.sign_tasks} tasks`);
  const pubA = createPublicKey({ key: a.spki, format: 'der', type: 'spki' });
  const pubB = createPublicKey({ key: b.spki, format: 'der', type: 'spki' });
  t.ok(sigs.every((s, i) => verify(i % 2 ? null : 'sha256', data[i] as Buffer, i % 2 ? pubB : pubA, s)), 'every item got its own key\'s signature over its own data');
});

t.test('check(): an unknown key-encryption key id or no key at all is refused, naming the owner', async (t) => {
  const kek = newKek();
  const first = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: kek, SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'ca:v1' });
  const key = await first.caKeys.generate('encrypted_database', 'ecdsa-p256', 'k');
  t.doesNotThrow(() => first.caKeys.check(key.ref, 'authority 1'));

  const rotated = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek(), SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'ca:v2' }, 1);
  t.throws(() => rotated.caKeys.check(key.ref, "authority 'tenant-a intermediate'"), /authority 'tenant-a intermediate': its key is wrapped by key-encryption key 'ca:v1', which this configuration does not have \(SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID is 'ca:v2'\)/);
  const err = await rotated.caKeys.sign(key.ref, Buffer.from('x')).catch((e: unknown) => e);
  t.ok(isAppError(err) && err.kind === 'UNAVAILABLE', 'signing with it is refused too');

  // Same id, different key: check() cannot know, the worker refuses to unwrap.
  const impostor = await startCaKeys(t, { SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek(), SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'ca:v1' }, 1);
  const err2 = await impostor.caKeys.sign(key.ref, Buffer.from('x')).catch((e: unknown) => e);
  t.ok(isAppError(err2) && err2.kind === 'UNAVAILABLE' && /does not decrypt under key-encryption key 'ca:v1'/.test(err2.message), (err2 as Error).message);

  const none = await startCaKeys(t, {}, 1);
  t.throws(() => none.caKeys.check(key.ref, 'authority 9'), /authority 9: its key is kept encrypted in the database, but SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set/);
  const err3 = await none.caKeys.generate('encrypted_database', 'ecdsa-p256', 'k').catch((e: unknown) => e);
  t.ok(isAppError(err3) && err3.kind === 'UNAVAILABLE' && /SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set/.test(err3.message));
  const err4 = await none.caKeys.importPrivateKey('x').catch((e: unknown) => e);
  t.ok(isAppError(err4) && err4.kind === 'UNAVAILABLE');
});
