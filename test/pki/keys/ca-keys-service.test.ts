// The CA keys as the service builds them (src/main.ts): service.caKeys over the service's worker pool,
// the 'ca_keys' health component, and a start refused by a wrong PKCS#11 PIN.
import { createPublicKey, verify } from 'node:crypto';
import t from 'tap';
import { createTestDatabase } from '../../helpers/database.js';
import { newKek } from '../../helpers/ca-keys.js';
import { startTestService } from '../../helpers/service.js';
import { createSoftHsmToken } from '../../helpers/softhsm.js';

const token = createSoftHsmToken(t);

// First: SoftHSM checks a PIN only while nothing in the process is logged in to the token.
t.test('a wrong PKCS#11 PIN stops the service start, naming the setting', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  await t.rejects(startTestService(t, { ...token.env, SVC_PKI_PKCS11_USER_PIN: '0000' }, db), /refused SVC_PKI_PKCS11_USER_PIN \(CKR_PIN_INCORRECT\)/);
});

t.test('service.caKeys signs with both backends; health reports ca_keys', async (t) => {
  const { service, url } = await startTestService(t, { ...token.env, SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() });
  for (const backend of ['encrypted_database', 'pkcs11'] as const) {
    const key = await service.caKeys.generate(backend, 'ecdsa-p256', `service ${backend}`);
    const data = Buffer.from(backend);
    t.ok(verify('sha256', data, createPublicKey({ key: key.spki, format: 'der', type: 'spki' }), await service.caKeys.sign(key.ref, data)), `${backend} signs`);
  }
  const res = await fetch(`${url()}/health`);
  const body = (await res.json()) as Record<string, unknown>;
  t.same(body.ca_keys, { status: 'ok' });
});
