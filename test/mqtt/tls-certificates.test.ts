// MQTT over TLS with client certificates the service issued, with mqtt.js as the TLS client: the handshake
// names only the root; a device's own certificate with its own key connects and publishes; its certificate
// with another device's key, a certificate the service never issued, and a revoked (key_compromise) one
// are refused with CONNACK 5 (not authorized); a connected client whose certificate is revoked is closed
// at its next publish. Without SVC_MQTT_TLS_CLIENT_CA_PATH a certificate stays optional: the key alone works.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { makeCertificates } from '../helpers/certificates.js';
import { openssl } from '../helpers/enrollment.js';
import { createTenant, ok } from '../helpers/management.js';
import { REVOKE, issueHeld, makeCaFiles } from '../helpers/pki.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { connect, deviceClient, publish, waitUntil } from './helpers.js';

const senml = (v: number) => JSON.stringify([{ n: 'urn:dev:cert:t', v }]);

t.test('MQTT over TLS: client certificates issued by the service', async (t) => {
  const ca = makeCaFiles(t);
  const server = makeCertificates();
  const ts = await startAuthService(t, {
    ...ca.env, SVC_MQTT_ADDR: 'off', SVC_COAP_ADDR: 'off', SVC_MQTTS_ADDR: '127.0.0.1:0',
    SVC_MQTT_TLS_CERT_PATH: server.cert, SVC_MQTT_TLS_KEY_PATH: server.key,
  });
  const port = ts.service.ports.mqtts!;
  const url = `mqtts://127.0.0.1:${port}`;
  const serverCa = readFileSync(server.ca);
  const admin = await adminToken(ts);
  const ws = await createTenant(ts, admin, 'cert-plant');
  const ch = await insertChannel(ts, ws, 'cert channel');
  const a = await insertDevice(ts, ws, 'cert-a');
  const b = await insertDevice(ts, ws, 'cert-b');
  await grant(ts, ws, a.id, ch, ['publish']);
  await grant(ts, ws, b.id, ch, ['publish']);
  const topic = `m/${ws}/c/${ch}`;
  const tlsOf = (held: { certificatePem: string; keyPem: string }) => ({ ca: serverCa, cert: held.certificatePem, key: held.keyPem });
  const certA = await issueHeld(ts, admin, ca.dir, a.id);

  await t.test('the handshake names the root as the acceptable client CA', async (t) => {
    const out = await openssl(['s_client', '-connect', `127.0.0.1:${port}`], '');
    t.match(out, /Acceptable client certificate CA names\nO = svc tests, CN = test root CA\n(?!CN|O =)/);
  });

  await t.test('its own certificate and key: connected, and it publishes', async (t) => {
    const client = await deviceClient(t, url, a, tlsOf(certA));
    await publish(client, topic, senml(1));
    t.pass('published over a connection bound to its certificate');
  });

  await t.test("device A's certificate with device B's key: not authorized", async (t) => {
    await t.rejects(deviceClient(t, url, b, tlsOf(certA)), { code: 5 }, 'CONNACK 5');
    t.ok(await deviceClient(t, url, b, { ca: serverCa }), 'B with its key and no certificate connects');
  });

  await t.test('a certificate the service did not issue: not authorized', async (t) => {
    const self = path.join(ca.dir, 'self');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${self}.key`, '-out', `${self}.pem`,
      '-subj', '/CN=me', '-days', '1'], { stdio: 'pipe' });
    await t.rejects(deviceClient(t, url, a, { ca: serverCa, cert: readFileSync(`${self}.pem`), key: readFileSync(`${self}.key`) }), { code: 5 });
  });

  await t.test('revoked (key_compromise): a connected client is closed, a new connection refused', async (t) => {
    const held = await issueHeld(ts, admin, ca.dir, a.id);
    const live = await deviceClient(t, url, a, tlsOf(held));
    let closed = false;
    live.once('close', () => { closed = true; });
    await ok(ts, admin, REVOKE, { i: { credentialId: held.credentialId, reason: 'key_compromise' } });
    // The session's certificate is checked again with its key, at most a second apart: publish until it is.
    // (A refused PUBLISH gets no PUBACK: its promise is left pending, never awaited.)
    let sent = 0;
    await waitUntil(() => {
      if (!closed && Date.now() - sent > 200) {
        sent = Date.now();
        void publish(live, topic, senml(2)).catch(() => undefined);
      }
      return closed;
    }, 5000, 'the connection of a revoked certificate closed');
    t.ok(closed, 'closed after the revocation');
    await t.rejects(deviceClient(t, url, a, tlsOf(held)), { code: 5 }, 'a new connection with it: CONNACK 5');
    t.ok(await deviceClient(t, url, a, tlsOf(certA)), 'its other, unrevoked certificate still connects');
  });

  await t.test('without a client CA setting, a certificate is optional', async (t) => {
    t.ok(await connect(t, url, { username: a.id, password: a.key, ca: serverCa }), 'key alone');
  });
});
