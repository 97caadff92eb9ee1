import { createRequire } from 'node:module';
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import t from 'tap';
import { ecdsaSigner, ecdsaSignerStatus } from '../../../workers/ecdsa-signer.js';

// The addon itself, for the refusals its TypeScript wrapper never provokes.
const addon = createRequire(import.meta.url)('../../../../workers/native/build/Release/ecdsa_signer.node') as {
  create(pkcs8?: unknown, hash?: unknown): object;
  sign(signer?: unknown, data?: unknown): Buffer;
};

t.test('the native signer is built and loaded (npm ci builds it)', async (t) => {
  t.same(ecdsaSignerStatus(), { native: true });
});

t.test('P-256/SHA-256 and P-384/SHA-384: DER signatures node:crypto verifies, a fresh one each time', async (t) => {
  for (const [curve, hash] of [['prime256v1', 'sha256'], ['secp384r1', 'sha384']] as const) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: curve });
    const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
    const signWith = ecdsaSigner(privateKey, pkcs8, hash);
    for (const data of [Buffer.alloc(0), Buffer.from('x'), Buffer.alloc(300, 7), new Uint8Array(5000).fill(9)]) {
      const a = signWith(data);
      const b = signWith(data);
      t.ok(verify(hash, data, publicKey, a), `${curve}: verifies over ${data.length} bytes`);
      t.ok(verify(hash, data, publicKey, b), `${curve}: and again`);
      t.not(a.toString('hex'), b.toString('hex'), `${curve}: a new random k per signature`);
      t.equal(a[0], 0x30, `${curve}: an ECDSA-Sig-Value SEQUENCE`);
      t.notOk(verify(hash, Buffer.concat([Buffer.from(data), Buffer.from('!')]), publicKey, a), `${curve}: bound to its data`);
    }
    // The same encoding crypto.sign answers: each verifies where the other does.
    const data = Buffer.from('same bytes');
    t.ok(verify(hash, data, publicKey, sign(hash, data, privateKey)) && verify(hash, data, publicKey, signWith(data)));
    // The hash is the one named: a P-256 signature over SHA-384 of the data does not verify as SHA-256.
    if (curve === 'prime256v1') {
      const other = ecdsaSigner(privateKey, pkcs8, 'sha384')(data);
      t.ok(verify('sha384', data, publicKey, other));
      t.notOk(verify('sha256', data, publicKey, other));
    }
  }
});

t.test('refusals are exceptions naming what was wrong, never a crash', async (t) => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'der' });
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'der' });
  t.throws(() => addon.create(rsa, 'sha256'), /not an EC private key/);
  t.throws(() => addon.create(Buffer.from('not a key'), 'sha256'), /not a DER private key/);
  t.throws(() => addon.create(ec, 'md5'), /hash must be sha256, sha384 or sha512/);
  t.throws(() => addon.create('text', 'sha256'), /pkcs8 must be a Uint8Array/);
  t.throws(() => addon.create(ec), /two arguments/);
  const signer = addon.create(ec, 'sha256');
  t.throws(() => addon.sign({}, Buffer.from('x')), /not a signer made by create/);
  t.throws(() => addon.sign(null, Buffer.from('x')), /not a signer made by create/);
  t.throws(() => addon.sign(signer, 'text'), /data must be a Uint8Array/);
  t.throws(() => addon.sign(signer, new Uint16Array(4)), /data must be a Uint8Array/);
  t.throws(() => addon.sign(signer), /two arguments/);
  t.equal(addon.sign(signer, Buffer.from('x'))[0], 0x30, 'the signer still works after the refusals');
});

t.test('an RSA or Ed25519 key given as EC is not taken: ecdsaSigner falls back to crypto.sign, which refuses it too', async (t) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const signWith = ecdsaSigner(privateKey, pkcs8, 'sha256');
  t.throws(() => signWith(Buffer.from('x')));
});
