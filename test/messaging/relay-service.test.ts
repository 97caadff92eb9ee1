// Two instances on one database, as behind a load balancer: a live WebSocket and a CoAP observation held
// by instance B get the messages published through instance A, each once and in order, and B's own
// messages once (not again through the relay); nothing is stored twice.
import t from 'tap';
import { WebSocket } from 'undici';
import { AUTH_ENV } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { BROKER_ENV, coapObserve } from '../mqtt/helpers.js';
import { countRows, publish, world } from './helpers.js';

const record = (n: string, v: number) => [{ bn: 'urn:dev:relay:', n, u: 'Cel', v }];

t.test('live sockets and CoAP observers get the messages another instance stored', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const a = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
  const b = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
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
