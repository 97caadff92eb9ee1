// MQTT over TLS (SVC_MQTT_TLS_CERT_PATH/_KEY_PATH on SVC_MQTTS_ADDR), with the plaintext listener off:
// a device publishes and subscribes over TLS with its key, the message is stored as mqtt; a plaintext
// client and a client that does not trust the certificate get nothing; with a client CA (mutual TLS) a
// connection without a client certificate is refused before any MQTT is read; bad settings stop the start.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { loadConfig } from '../../src/config.js';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { makeCertificates } from '../helpers/certificates.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { connect, deviceClient, inbox, publish, readMessages, subscribe, waitUntil } from './helpers.js';

const senml = (n: string, v: number) => JSON.stringify([{ bn: 'urn:dev:tls:', n, v }]);

t.test('MQTT over TLS only', async (t) => {
  const files = makeCertificates();
  const ts = await startAuthService(t, {
    SVC_MQTT_ADDR: 'off', SVC_COAP_ADDR: 'off', SVC_MQTTS_ADDR: '127.0.0.1:0', SVC_MQTT_TLS_CERT_PATH: files.cert, SVC_MQTT_TLS_KEY_PATH: files.key,
  });
  t.equal(ts.service.ports.mqtt, undefined, 'no plaintext listener');
  const url = `mqtts://127.0.0.1:${ts.service.ports.mqtts}`;
  const ca = readFileSync(files.ca);
  const ws = await insertTenant(ts, 'tls-plant');
  const ch = await insertChannel(ts, ws, 'tls channel');
  const device = await insertDevice(ts, ws, 'tls-sensor');
  await grant(ts, ws, device.id, ch, ['publish', 'subscribe']);
  const topic = `m/${ws}/c/${ch}`;

  const sub = await deviceClient(t, url, device, { ca });
  t.same(await subscribe(sub, topic, 1), [1]);
  const box = inbox(sub);
  const pub = await deviceClient(t, url, device, { ca, protocolVersion: 5 });
  await publish(pub, topic, senml('secure', 1), { qos: 1 });
  t.same(JSON.parse((await box.waitFor(1))[0]!.payload), JSON.parse(senml('secure', 1)));
  t.match((await readMessages(ts, ws, ch, device.key)).messages[0], { protocol: 'mqtt', name: 'urn:dev:tls:secure' });

  await t.rejects(connect(t, url, { username: device.id, password: `${device.key}x`, ca }), { code: 4 }, 'the key is still checked');
  await t.rejects(connect(t, url, { username: device.id, password: device.key }), /self.signed|unable to verify|certificate/i, 'a client that does not trust the certificate');
  const protocolErrors = async () => ((await (await fetch(`${ts.url('broker_admin')}/api/v1/stats`)).json()) as {
    by_protocol: { mqtt: { errors: { protocol: number } } };
  }).by_protocol.mqtt.errors.protocol;
  const errorsBefore = await protocolErrors();
  await t.rejects(connect(t, `mqtt://127.0.0.1:${ts.service.ports.mqtts}`, { username: device.id, password: device.key, connectTimeout: 1500 }), 'plaintext on the TLS port gets no CONNACK');
  await waitUntil(async () => (await protocolErrors()) > errorsBefore, 3000, 'the failed handshake counted');
  t.pass('a failed handshake counts as a protocol error in the broker stats');
});

t.test('mutual TLS: a client certificate signed by the configured CA is required as well as the key', async (t) => {
  const files = makeCertificates();
  const ts = await startAuthService(t, {
    SVC_MQTT_ADDR: 'off', SVC_COAP_ADDR: 'off', SVC_MQTTS_ADDR: '127.0.0.1:0',
    SVC_MQTT_TLS_CERT_PATH: files.cert, SVC_MQTT_TLS_KEY_PATH: files.key, SVC_MQTT_TLS_CLIENT_CA_PATH: files.ca,
  });
  const url = `mqtts://127.0.0.1:${ts.service.ports.mqtts}`;
  const ca = readFileSync(files.ca);
  const ws = await insertTenant(ts, 'mtls-plant');
  const device = await insertDevice(ts, ws, 'mtls-sensor');
  const withCert = { ca, cert: readFileSync(files.clientCert), key: readFileSync(files.clientKey) };
  const client = await deviceClient(t, url, device, withCert);
  t.ok(client.connected, 'certificate and key: connected');
  await t.rejects(deviceClient(t, url, device, { ca, connectTimeout: 1500 }), 'no client certificate: refused');
});

t.test('TLS settings are checked before the start', async (t) => {
  t.throws(() => loadConfig({ SVC_MQTT_TLS_CERT_PATH: '/c.pem' }), /SVC_MQTT_TLS_CERT_PATH and SVC_MQTT_TLS_KEY_PATH must be set together/);
  t.throws(() => loadConfig({ SVC_MQTT_TLS_CLIENT_CA_PATH: '/ca.pem' }), /SVC_MQTT_TLS_CLIENT_CA_PATH needs/);
  t.equal(loadConfig({}).listeners.mqtts, null, 'no certificate: no TLS listener');
  t.same(loadConfig({ SVC_MQTT_TLS_CERT_PATH: '/c.pem', SVC_MQTT_TLS_KEY_PATH: '/k.pem' }).listeners.mqtts, { host: '0.0.0.0', port: 8883 });
  await t.rejects(startAuthService(t, {
    SVC_MQTT_ADDR: 'off', SVC_COAP_ADDR: 'off', SVC_MQTTS_ADDR: '127.0.0.1:0', SVC_MQTT_TLS_CERT_PATH: '/nonexistent/cert.pem', SVC_MQTT_TLS_KEY_PATH: '/nonexistent/key.pem',
  }), { message: /MQTT TLS certificate \/nonexistent\/cert.pem cannot be read/ });
});
