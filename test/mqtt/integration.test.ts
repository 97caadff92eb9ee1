// MQTT and CoAP through the real service: messages stored by the messaging pipeline and read back by the
// reader with their protocol, refusals for devices without publish and for another workspace's devices,
// QoS 1, retained messages, persistent sessions, and HTTP/CoAP messages delivered to MQTT subscribers.
import t from 'tap';
import { KEY_RECHECK_MS } from '../../src/mqtt/hooks.js';
import { adminToken, insertTenant, startAuthService } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { BROKER_ENV, coapPost, connect, deviceClient, inbox, publish, readMessages, sleep, subscribe, waitUntil } from './helpers.js';

const senml = (n: string, v: number) => JSON.stringify([{ bn: 'urn:dev:test:', n, u: 'Cel', v }]);

t.test('MQTT and CoAP through the messaging pipeline', async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const mqttPort = ts.service.ports.mqtt!;
  const coapPort = ts.service.ports.coap!;
  const ws = await insertTenant(ts, 'plant-a');
  const otherWs = await insertTenant(ts, 'plant-b');
  const ch = await insertChannel(ts, ws, 'boiler');
  const otherCh = await insertChannel(ts, otherWs, 'other boiler');
  const [pubsub, listener, readOnly] = await Promise.all(['sensor', 'listener', 'read-only'].map((n) => insertDevice(ts, ws, n)));
  const foreign = await insertDevice(ts, otherWs, 'foreign');
  await grant(ts, ws, pubsub!.id, ch, ['publish', 'subscribe']);
  await grant(ts, ws, listener!.id, ch, ['subscribe']);
  await grant(ts, ws, readOnly!.id, ch, ['subscribe']);
  await grant(ts, otherWs, foreign!.id, otherCh, ['publish', 'subscribe']);
  const topic = `m/${ws}/c/${ch}`;
  const stored = async () => (await readMessages(ts, ws, ch, listener!.key)).total;

  await t.test('a publisher and a subscriber over MQTT; the reader sees protocol mqtt', async (t) => {
    const sub = await deviceClient(t, mqttPort, listener!);
    t.same(await subscribe(sub, topic, 1), [1]);
    const box = inbox(sub);
    const pub = await deviceClient(t, mqttPort, pubsub!);
    await publish(pub, topic, senml('temp', 21.5), { qos: 1 });
    const [got] = await box.waitFor(1);
    t.match(got, { topic, qos: 1 });
    t.same(JSON.parse(got!.payload), JSON.parse(senml('temp', 21.5)), 'subscribers get the payload as published');
    const read = await readMessages(ts, ws, ch, listener!.key);
    t.match(read.messages[0], { protocol: 'mqtt', name: 'urn:dev:test:temp', value: 21.5, publisher: pubsub!.id });
  });

  await t.test('CONNECT refused for a wrong key or a username that is not the key holder', async (t) => {
    await t.rejects(connect(t, mqttPort, { username: pubsub!.id, password: `${pubsub!.key}x` }), { code: 4 });
    await t.rejects(connect(t, mqttPort, { username: listener!.id, password: pubsub!.key }), { code: 4 });
  });

  await t.test('a device without publish is refused on MQTT and CoAP; nothing stored', async (t) => {
    const before = await stored();
    const sub = await deviceClient(t, mqttPort, listener!);
    await subscribe(sub, topic, 1);
    const box = inbox(sub);
    const ro = await deviceClient(t, mqttPort, readOnly!);
    await publish(ro, topic, senml('nope', 1), { qos: 1 });
    t.match(await coapPost(coapPort, `/${topic}?auth=${readOnly!.key}`, senml('nope', 2), { 'Content-Format': 'application/senml+json' }), { code: '4.03' });
    await sleep(150);
    t.equal(await stored(), before, 'nothing stored');
    t.equal(box.messages.length, 0, 'nothing delivered');
  });

  await t.test("another workspace's device can neither publish to nor subscribe to this channel", async (t) => {
    const before = await stored();
    const f = await deviceClient(t, mqttPort, foreign!);
    t.same(await subscribe(f, [topic, `${topic}/#`, `m/${otherWs}/c/${otherCh}`], 1), [128, 128, 1]);
    await publish(f, topic, senml('intruder', 1), { qos: 1 });
    const coap = await coapPost(coapPort, `/${topic}?auth=${foreign!.key}`, senml('intruder', 2));
    t.ok(['4.03', '4.04'].includes(coap.code), `CoAP refused (${coap.code})`);
    await sleep(150);
    t.equal(await stored(), before);
  });

  await t.test('CoAP publish stored with protocol coap and delivered to MQTT subscribers', async (t) => {
    const sub = await deviceClient(t, mqttPort, listener!);
    await subscribe(sub, `${topic}/#`, 1);
    const box = inbox(sub);
    t.match(await coapPost(coapPort, `/${topic}/kitchen?auth=${pubsub!.key}`, senml('coap-temp', 19), { 'Content-Format': 'application/senml+json' }), { code: '2.04' });
    const read = await readMessages(ts, ws, ch, listener!.key);
    t.match(read.messages.find((m) => m.name === 'urn:dev:test:coap-temp'), { protocol: 'coap', value: 19 });
    const [got] = await box.waitFor(1);
    t.equal(got!.topic, `${topic}/kitchen`);
    t.match(JSON.parse(got!.payload), [{ n: 'urn:dev:test:coap-temp', u: 'Cel', v: 19 }]);
  });

  await t.test('HTTP publish delivered to MQTT subscribers', async (t) => {
    const sub = await deviceClient(t, mqttPort, listener!);
    await subscribe(sub, topic, 0);
    const box = inbox(sub);
    const res = await fetch(`${ts.url('messaging')}/http/m/${ws}/c/${ch}`, {
      method: 'POST', headers: { authorization: `Client ${pubsub!.key}`, 'content-type': 'application/senml+json' }, body: senml('http-temp', 20),
    });
    t.equal(res.status, 202);
    const [got] = await box.waitFor(1);
    t.match(JSON.parse(got!.payload), [{ n: 'urn:dev:test:http-temp', v: 20 }]);
  });

  await t.test('retained message for a late subscriber; an empty retained publish clears it', async (t) => {
    const pub = await deviceClient(t, mqttPort, pubsub!);
    await publish(pub, `${topic}/state`, senml('state', 1), { qos: 1, retain: true });
    const late = await deviceClient(t, mqttPort, listener!);
    const box = inbox(late);
    await subscribe(late, `${topic}/state`, 1);
    const [got] = await box.waitFor(1);
    t.match(got, { retain: true, topic: `${topic}/state` });
    const ro = await deviceClient(t, mqttPort, readOnly!);
    await publish(ro, `${topic}/state`, '', { qos: 1, retain: true });
    const later = await deviceClient(t, mqttPort, listener!);
    const box2 = inbox(later);
    await subscribe(later, `${topic}/state`, 1);
    await box2.waitFor(1);
    t.pass('a device without publish cannot clear it');
    await publish(pub, `${topic}/state`, '', { qos: 1, retain: true });
    const last = await deviceClient(t, mqttPort, listener!);
    const box3 = inbox(last);
    await subscribe(last, `${topic}/state`, 1);
    await sleep(200);
    t.equal(box3.messages.length, 0, 'cleared by the publisher');
  });

  await t.test('persistent session gets what was published while it was offline (QoS 1)', async (t) => {
    const clientId = `listener-${Date.now()}`;
    const first = await deviceClient(t, mqttPort, listener!, { clientId, clean: false });
    await subscribe(first, topic, 1);
    await new Promise<void>((r) => first.end(false, {}, () => r()));
    const pub = await deviceClient(t, mqttPort, pubsub!);
    await publish(pub, topic, senml('while-offline', 5), { qos: 1 });
    await fetch(`${ts.url('messaging')}/http/m/${ws}/c/${ch}`, {
      method: 'POST', headers: { authorization: `Client ${pubsub!.key}`, 'content-type': 'application/senml+json' }, body: senml('http-offline', 6),
    });
    const back = await deviceClient(t, mqttPort, listener!, { clientId, clean: false });
    const box = inbox(back);
    const msgs = await box.waitFor(2);
    const names = msgs.map((m) => JSON.parse(m.payload)[0] as { bn?: string; n: string }).map((r) => `${r.bn ?? ''}${r.n}`);
    t.same(names.sort(), ['urn:dev:test:http-offline', 'urn:dev:test:while-offline'], 'the MQTT one as published, the HTTP one resolved');
  });

  await t.test('a revoked key stops publishing on an open connection within the re-check bound', async (t) => {
    const spare = await insertDevice(ts, ws, 'spare');
    await grant(ts, ws, spare.id, ch, ['publish']);
    const pub = await deviceClient(t, mqttPort, spare);
    await publish(pub, topic, senml('before-revoke', 1), { qos: 1 });
    const before = await stored();
    const res = await gql(ts.url(), `mutation ($id: ID!) { revokeCredential(credentialId: $id) }`, { id: spare.credentialId }, await adminToken(ts));
    t.equal(res.body.data?.revokeCredential, true);
    await sleep(KEY_RECHECK_MS + 100);
    const closed = new Promise<void>((r) => pub.once('close', () => r()));
    pub.publish(topic, senml('after-revoke', 2), { qos: 1 });
    await closed;
    t.pass('connection closed without PUBACK');
    t.equal(await stored(), before, 'nothing stored');
    await t.rejects(deviceClient(t, mqttPort, spare), { code: 4 }, 'and it cannot connect again');
  });

  await t.test('many QoS 1 publishes in one burst: all acknowledged after storage, in order', async (t) => {
    const before = await stored();
    const pub = await deviceClient(t, mqttPort, pubsub!);
    const acks: number[] = [];
    await Promise.all(Array.from({ length: 200 }, (_, i) => publish(pub, topic, senml(`burst-${i}`, i), { qos: 1 }).then(() => acks.push(i))));
    t.same(acks, Array.from({ length: 200 }, (_, i) => i), 'PUBACKs in PUBLISH order');
    await waitUntil(async () => (await stored()) === before + 200, 3000, 'all stored');
    t.pass('every acknowledged message is stored');
  });
});
