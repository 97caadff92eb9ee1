// The MQTT and CoAP listeners of a running service under hostile bytes, from a seeded generator (the seed
// is in the test name; FUZZ_SEED replays it): MQTT connections that send random bytes, a mutated CONNECT,
// or a valid CONNECT followed by a mutated stream of PUBLISH, SUBSCRIBE and PINGREQ packets; CoAP datagrams
// of random bytes and mutated publishes. Afterwards the service still serves every protocol, nothing
// reached a channel the device may not publish to, and what was stored came from that device.
import dgram from 'node:dgram';
import { generate as coapPacket } from 'coap-packet';
import { generate as mqttPacket } from 'mqtt-packet';
import t from 'tap';
import { AUTH_ENV } from '../helpers/auth.js';
import { FUZZ_SEED, generator, type Generator } from '../helpers/fuzz.js';
import { startTestService } from '../helpers/service.js';
import { countRows, publish as httpPublish, world } from '../messaging/helpers.js';
import { BROKER_ENV, coapPost, deviceClient, inbox, publish, rawMqttSession, subscribe } from './helpers.js';

const senml = (v: number) => JSON.stringify([{ bn: 'urn:dev:fuzz:', n: 'temp', u: 'Cel', v }]);

t.test(`MQTT and CoAP listeners under hostile bytes keep serving (seed ${FUZZ_SEED})`, async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV });
  const w = await world(ts, 'hostile');
  const other = await world(ts, 'hostile-other');
  const mqttPort = ts.service.ports.mqtt!;
  const coapPort = ts.service.ports.coap!;
  const topic = `m/${w.ws}/c/${w.channel}`;
  const g = generator(FUZZ_SEED);

  const connect = (id: string) => mqttPacket({
    cmd: 'connect', protocolId: 'MQTT', protocolVersion: g.pick([4, 5] as const), clean: g.next() < 0.5, clientId: id, keepalive: 10,
    username: w.publisher.id, password: Buffer.from(w.publisher.key),
  });
  const packets = (g: Generator): Buffer[] => Array.from({ length: 1 + g.int(6) }, (_, i) => {
    switch (g.int(4)) {
      case 0: return mqttPacket({ cmd: 'subscribe', messageId: i + 1, subscriptions: [{ topic: g.pick([topic, `${topic}/#`, `m/${other.ws}/c/${other.channel}`]), qos: 1 }] });
      case 1: return mqttPacket({ cmd: 'pingreq' });
      default: return mqttPacket({ cmd: 'publish', topic: g.pick([topic, `${topic}/a/b`, `m/${other.ws}/c/${other.channel}`]), payload: senml(i), qos: g.pick([0, 1] as const), messageId: i + 1, retain: g.next() < 0.2, dup: false });
    }
  });

  for (let round = 0; round < 25; round++) {
    const sessions: Promise<void>[] = [];
    for (let k = 0; k < 8; k++) {
      const id = `fuzz-${round}-${k}`;
      const roll = g.next();
      let chunks: Buffer[];
      if (roll < 0.2) chunks = [g.bytes(1 + g.int(64))];
      else if (roll < 0.4) chunks = [g.mutate(connect(id)), ...packets(g)];
      else chunks = [connect(id), ...packets(g).map((p) => (g.next() < 0.5 ? g.mutate(p) : p))];
      sessions.push(rawMqttSession(mqttPort, chunks));
    }
    await Promise.all(sessions);
  }

  const udp = dgram.createSocket('udp4');
  t.teardown(() => udp.close());
  for (let i = 0; i < 1500; i++) {
    const valid = coapPacket({
      messageId: i, token: g.bytes(g.int(5)), confirmable: g.next() < 0.5, code: g.pick(['0.02', '0.01', '0.03']),
      options: [
        ...`m/${w.ws}/c/${g.pick([w.channel, other.channel])}`.split('/').map((segment) => ({ name: 'Uri-Path' as const, value: Buffer.from(segment) })),
        { name: 'Uri-Query', value: Buffer.from(`auth=${w.publisher.key}`) },
      ],
      payload: Buffer.from(senml(i)),
    });
    const datagram = g.next() < 0.2 ? g.bytes(g.int(80)) : g.mutate(valid);
    udp.send(datagram, coapPort, '127.0.0.1');
    if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 300));

  // Still serving: MQTT subscribe and publish, CoAP and HTTP publishes, all stored.
  const subscriber = await deviceClient(t, mqttPort, w.publisher);
  t.same(await subscribe(subscriber, topic, 1), [1], 'MQTT SUBSCRIBE');
  const box = inbox(subscriber);
  const before = await countRows(ts, w.channel);
  t.ok(before > 0, `${before} messages of the hostile traffic got through whole and were stored`);
  const publisher = await deviceClient(t, mqttPort, w.publisher);
  await publish(publisher, topic, senml(1), { qos: 1 });
  t.match(await coapPost(coapPort, `/m/${w.ws}/c/${w.channel}?auth=${w.publisher.key}`, senml(2)), { code: '2.04' }, 'CoAP publish');
  t.equal((await httpPublish(ts, w.ws, w.channel, w.publisher.key, senml(3))).status, 202, 'HTTP publish');
  await box.waitFor(3);
  t.equal(await countRows(ts, w.channel), before + 3, 'the three stored');

  t.equal(await countRows(ts, other.channel), 0, 'nothing reached the channel the device may not publish to');
  // A mutated payload may still be valid SenML (another name or value): stored as published, by the device.
  const [stray] = await ts.service.sql<{ n: number }[]>`
    select count(*)::int as n from messages where channel_id = ${w.channel} and publisher_id <> ${w.publisher.id}`;
  t.equal(stray!.n, 0, 'everything stored on the channel came from the device');
});
