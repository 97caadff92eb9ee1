// MQTT 5 clients against the real service: CONNACK reason codes, a QoS 1 round trip stored and read back,
// refusals answered with reason codes (0x87 PUBACK under 'ignore', the connection kept; a DISCONNECT
// under 'disconnect'), SUBACK 0x87 for a channel without subscribe, another workspace refused. The
// transient failure (DISCONNECT 0x89, no PUBACK) is in broker.test.ts, where storage can be made to fail.
// A stated Content Type (MQTT 5) other than SenML or plain JSON is refused rather than read as JSON.
import t from 'tap';
import type { MqttClient } from 'mqtt';
import { startAuthService } from '../helpers/auth.js';
import { insertChannel, twoWorkspaces } from '../messaging/helpers.js';
import { BROKER_ENV, connect, deviceClient, inbox, publish, readMessages, sleep, subscribe } from './helpers.js';

const V5 = { protocolVersion: 5 } as const;
const senml = (n: string, v: number) => JSON.stringify([{ n, u: 'Cel', v }]);

/** The PUBACK's reason code: 0 when stored, the refusal's code otherwise. */
function pubackCode(client: MqttClient, topic: string, payload: string): Promise<number> {
  return new Promise((resolve) => client.publish(topic, payload, { qos: 1 }, (err) => resolve(err ? Number((err as { code?: number }).code) : 0)));
}

function disconnectReason(client: MqttClient): Promise<number> {
  return new Promise((resolve) => client.once('disconnect', (packet) => resolve(packet.reasonCode ?? 0)));
}

for (const denyAction of ['ignore', 'disconnect'] as const) {
  t.test(`MQTT 5 with SVC_MQTT_DENY_ACTION=${denyAction}`, async (t) => {
    const ts = await startAuthService(t, { ...BROKER_ENV, SVC_MQTT_DENY_ACTION: denyAction });
    const port = ts.service.ports.mqtt!;
    const { ws, otherWs, channel: ch, publisher: sensor, subscriber: reader, otherChannel: otherCh, foreign } = await twoWorkspaces(ts, `v5-${denyAction}`);
    const closed = await insertChannel(ts, ws, 'closed line');
    const topic = `m/${ws}/c/${ch}`;
    const stored = async () => (await readMessages(ts, ws, ch, reader.key)).total;

    await t.test('CONNACK reason codes', async (t) => {
      await t.rejects(connect(t, port, { ...V5, username: sensor.id, password: `${sensor.key}x` }), { code: 0x86 }, 'bad key: 0x86');
      await t.rejects(connect(t, port, { ...V5, username: reader.id, password: sensor.key }), { code: 0x86 }, "another device's key: 0x86");
      const ok = await deviceClient(t, port, sensor, V5);
      t.equal(ok.options.protocolVersion, 5, 'a v5 session');
    });

    await t.test('publish, store, deliver and read back', async (t) => {
      const sub = await deviceClient(t, port, reader, V5);
      t.same(await subscribe(sub, topic, 1), [1]);
      const box = inbox(sub);
      const pub = await deviceClient(t, port, sensor, V5);
      t.equal(await pubackCode(pub, topic, senml('temp', 20.5)), 0, 'PUBACK success after storage');
      const [got] = await box.waitFor(1);
      t.same(JSON.parse(got!.payload), JSON.parse(senml('temp', 20.5)), 'delivered to a v5 subscriber');
      const read = await readMessages(ts, ws, ch, reader.key);
      t.match(read.messages[0], { protocol: 'mqtt', name: 'temp', value: 20.5, publisher: sensor.id });
    });

    await t.test('SUBACK 0x87 for a channel without subscribe and for another workspace', async (t) => {
      const sub = await deviceClient(t, port, reader, V5);
      t.same(await subscribe(sub, [`m/${ws}/c/${closed}`, `m/${otherWs}/c/${otherCh}`, topic], 1), [0x87, 0x87, 1], 'refused filters only');
    });

    await t.test('a refused publish: nothing stored, the reason code says why', async (t) => {
      const before = await stored();
      const pub = await deviceClient(t, port, reader, V5); // subscribe only: no publish right
      if (denyAction === 'ignore') {
        t.equal(await pubackCode(pub, topic, senml('nope', 1)), 0x87, 'PUBACK 0x87 (not authorized)');
        t.equal(await pubackCode(pub, `m/${otherWs}/c/${otherCh}`, senml('nope', 2)), 0x87, "another workspace's channel: 0x87");
        t.notOk(pub.disconnected, 'the connection stays open');
        const sensorPub = await deviceClient(t, port, sensor, V5);
        t.equal(await pubackCode(sensorPub, topic, '[{"n":"bad","v":"not a number"}]'), 0x87, 'invalid SenML is refused with a reason too');
      } else {
        const reason = disconnectReason(pub);
        pub.publish(topic, senml('nope', 1), { qos: 1 });
        t.equal(await reason, 0x87, 'DISCONNECT 0x87 (not authorized)');
        const sensorPub = await deviceClient(t, port, sensor, V5);
        const invalid = disconnectReason(sensorPub);
        sensorPub.publish(topic, '[{"n":"bad","v":"not a number"}]', { qos: 1 });
        t.equal(await invalid, 0x99, 'invalid SenML: DISCONNECT 0x99 (payload format invalid)');
      }
      await sleep(100);
      t.equal(await stored(), before, 'nothing stored');
    });

    await t.test('a stated Content Type: SenML or plain JSON is read, any other is refused, not misread', async (t) => {
      const before = await stored();
      const pub = await deviceClient(t, port, sensor, V5);
      const typed = (contentType: string, payload: string) => new Promise<number>((resolve) => pub.publish(topic, payload, { qos: 1, properties: { contentType } }, (err) => resolve(err ? Number((err as { code?: number }).code) : 0)));
      t.equal(await typed('application/senml+json', senml('typed', 1)), 0, 'senml+json');
      t.equal(await typed('application/json', senml('typed', 2)), 0, 'plain JSON holding SenML');
      t.equal(await typed('Application/JSON; charset=utf-8', senml('typed', 2)), 0, 'in any case, with parameters');
      t.equal(await stored(), before + 3, 'all stored');
      // A JSON text that is valid SenML, stated as CBOR: stored before (the type was never read).
      if (denyAction === 'ignore') {
        t.equal(await typed('application/senml+cbor', senml('typed', 3)), 0x87, 'another type: refused with its reason');
        t.notOk(pub.disconnected, 'the connection stays open');
      } else {
        const reason = disconnectReason(pub);
        pub.publish(topic, senml('typed', 3), { qos: 1, properties: { contentType: 'application/senml+cbor' } });
        t.equal(await reason, 0x99, 'another type: DISCONNECT 0x99 (payload format invalid)');
      }
      await sleep(100);
      t.equal(await stored(), before + 3, 'the refused one is not stored');
    });
  });
}
