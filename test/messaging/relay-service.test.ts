// Two instances on one database, as behind a load balancer: a live WebSocket, a CoAP observation and an
// MQTT subscription (no Redis) held by instance B get the messages published through instance A, each
// once and in order, and B's own messages once (not again through the relay); nothing is stored twice.
import t, { type Test } from 'tap';
import { WebSocket } from 'undici';
import { AUTH_ENV } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { BROKER_ENV, coapObserve, deviceClient, inbox, publish as mqttPublish, subscribe } from '../mqtt/helpers.js';
import { countRows, publish, world } from './helpers.js';

const record = (n: string, v: number) => [{ bn: 'urn:dev:relay:', n, u: 'Cel', v }];

/** Two instances of the service on one database, as behind a load balancer (no Redis). */
async function twoInstances(t: Test) {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const a = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
  const b = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
  return { a, b };
}

t.test('live sockets and CoAP observers get the messages another instance stored', async (t) => {
  const { a, b } = await twoInstances(t);
  const w = await world(a, 'relayed');

  const frames: { name: string; value: number; protocol: string }[] = [];
  const socket = new WebSocket(`${b.url('messaging').replace('http:', 'ws:')}/ws/m/${w.ws}/c/${w.channel}`, { headers: { authorization: `Client ${w.publisher.key}` } });
  t.teardown(() => socket.close());
  socket.addEventListener('message', (e) => frames.push(JSON.parse(String(e.data))));
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve());
    socket.addEventListener('error', () => reject(new Error('socket error')));
  });
  const observed = await coapObserve(t, b.service.ports.coap!, `/m/${w.ws}/c/${w.channel}?auth=${w.publisher.key}`);
  t.equal(observed.code, '2.05');

  // B announces its watch over NOTIFY; until A has heard it, A's messages are not relayed. Publish probes
  // through A until one arrives.
  let probes = 0;
  await waitUntil(async () => {
    t.equal((await publish(a, w.ws, w.channel, w.publisher.key, record(`probe-${++probes}`, 0))).status, 202);
    await new Promise((r) => setTimeout(r, 50));
    return frames.length > 0;
  }, 5000, 'a relayed message');
  await waitUntil(() => observed.payloads.length > 1, 2000, 'the probe notified');
  const framesBefore = frames.length;
  const notifiedBefore = observed.payloads.length;

  for (let i = 1; i <= 3; i++) t.equal((await publish(a, w.ws, w.channel, w.publisher.key, record('through-a', i))).status, 202);
  t.equal((await publish(b, w.ws, w.channel, w.publisher.key, record('through-b', 4))).status, 202);
  await waitUntil(() => frames.length >= framesBefore + 4, 3000, 'four frames');
  await new Promise((r) => setTimeout(r, 200));

  const names = frames.slice(framesBefore).map((f) => `${f.name}=${f.value}`);
  t.same(names.filter((n) => n.includes('through-a')), ['urn:dev:relay:through-a=1', 'urn:dev:relay:through-a=2', 'urn:dev:relay:through-a=3'], "A's messages on B's socket, once each, in order");
  t.same(names.filter((n) => n.includes('through-b')), ['urn:dev:relay:through-b=4'], "B's own message once");
  t.equal(names.length, 4, 'nothing else, nothing twice');
  t.match(frames.at(-1), { protocol: 'http', channel: w.channel, publisher: w.publisher.id }, 'the reader\'s shape, as for local messages');

  const notified = observed.payloads.slice(notifiedBefore).flatMap((p) => JSON.parse(p) as { n: string; v: number }[]);
  t.same(notified.map((r) => `${r.n}=${r.v}`).sort(), names.slice().sort(), 'the CoAP observer on B got the same four');
  t.equal(await countRows(a, w.channel), probes + 4, 'each message stored once');
});

t.test('MQTT subscribers of one instance get what the other stored, without Redis: one PUBLISH per publish, once', async (t) => {
  const { a, b } = await twoInstances(t);
  const w = await world(a, 'mqtt-relayed');
  const other = await world(a, 'mqtt-elsewhere');
  const topic = `m/${w.ws}/c/${w.channel}`;

  const subscriber = await deviceClient(t, b.service.ports.mqtt!, w.publisher);
  t.same(await subscribe(subscriber, `${topic}/#`, 1), [1]);
  const box = inbox(subscriber);
  // Another workspace's device on B: refused this channel, and nothing of it reaches its own.
  const outsider = await deviceClient(t, b.service.ports.mqtt!, other.publisher);
  t.same(await subscribe(outsider, [topic, `m/${other.ws}/c/${other.channel}`], 1), [128, 1], "another workspace's channel is refused");
  const outsiderBox = inbox(outsider);

  let probes = 0;
  await waitUntil(async () => {
    t.equal((await publish(a, w.ws, w.channel, w.publisher.key, record(`probe-${++probes}`, 0))).status, 202);
    await new Promise((r) => setTimeout(r, 50));
    return box.messages.length > 0;
  }, 5000, "B's watch heard by A");
  await new Promise((r) => setTimeout(r, 200));
  const before = box.messages.length;

  const twoRecords = [{ bn: 'urn:dev:relay:', n: 'pair', u: 'Cel', v: 1 }, { n: 'pair', v: 2 }];
  t.equal((await publish(a, w.ws, w.channel, w.publisher.key, twoRecords, { subtopic: 'room' })).status, 202);
  const mqttOnA = await deviceClient(t, a.service.ports.mqtt!, w.publisher);
  await mqttPublish(mqttOnA, topic, JSON.stringify(record('mqtt-on-a', 3)), { qos: 1 });
  const mqttOnB = await deviceClient(t, b.service.ports.mqtt!, w.publisher);
  await mqttPublish(mqttOnB, topic, JSON.stringify(record('mqtt-on-b', 4)), { qos: 1 });
  await box.waitFor(before + 3);
  await new Promise((r) => setTimeout(r, 300));

  const got = box.messages.slice(before).map((m) => ({ topic: m.topic, names: (JSON.parse(m.payload) as { n: string; v: number }[]).map((r) => `${r.n}=${r.v}`) }));
  t.same(got.filter((g) => !g.names[0]!.includes('mqtt-on-b')), [
    { topic: `${topic}/room`, names: ['urn:dev:relay:pair=1', 'urn:dev:relay:pair=2'] },
    { topic, names: ['urn:dev:relay:mqtt-on-a=3'] },
  ], "A's publishes, in order, each one PUBLISH on its topic (subtopic kept)");
  t.equal(got.filter((g) => g.names[0]!.includes('mqtt-on-b')).length, 1, "B's own MQTT publish once, not again through the relay");
  t.equal(got.length, 3, 'nothing else, nothing twice');
  t.equal(outsiderBox.messages.length, 0, "the other workspace's subscriber got none of it");
  t.equal(await countRows(a, w.channel), probes + 4, 'each message stored once');
});
