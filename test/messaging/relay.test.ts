// The message relay between instances, over an in-memory stand-in for the notify hub that behaves like
// LISTEN/NOTIFY (every instance gets every notification, itself too, as a JSON copy; payloads must stay
// under 8000 bytes): who relays what to whom, chunking, watches counted, withdrawn, lapsed and synced.
// relay-service.test.ts runs two real instances on one database.
import t, { type Test } from 'tap';
import type { Sql } from '../../src/db/client.js';
import { chunkPublishes, createRelay, publishesOf, RELAY_CHUNK_BYTES, type Relay } from '../../src/messaging/relay.js';
import type { StoredMessage, StoredSource } from '../../src/messaging/index.js';
import { testLogger } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

const WS = '6f1c9d2e-1111-4a55-9d55-000000000001';
const CH = '6f1c9d2e-2222-4a55-9d55-000000000002';
const OTHER = '6f1c9d2e-2222-4a55-9d55-000000000003';
/**
 * Waits ms, then a few turns of the event loop: the relay and the stand-in hub pass everything on with
 * setImmediate, so those turns carry an announcement or a notification through even when this process
 * was held off the CPU for longer than ms (a timer that fired late runs before the pending immediates).
 */
async function tick(ms = 20): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

function message(i: number, extra: Partial<StoredMessage> = {}): StoredMessage {
  return {
    channel: CH, publisher: 'dev-1', protocol: 'http', subtopic: null, name: `urn:dev:m:${i}`, unit: 'Cel', time: 1_700_000_000 + i,
    value: i, stringValue: null, boolValue: null, dataValue: null, sum: null, ...extra,
  };
}

type Handler = (payload: unknown) => void;

/** Instances on one stand-in hub; `muted` instances' notifications are lost (a crashed or cut-off node). */
function cluster(t: Test) {
  const hubs = new Set<{ topics: Map<string, Set<Handler>>; link: { down: boolean } }>();
  const sent: { from: string; topic: string; bytes: number }[] = [];
  const muted = new Set<string>();
  const relays: Relay[] = [];
  t.teardown(() => Promise.all(relays.map((r) => r.close())));

  function instance(name: string, announceMs = 30_000) {
    const topics = new Map<string, Set<Handler>>();
    const reconnectHandlers = new Set<() => void>();
    /** While down, this instance's LISTEN connection is lost: nothing reaches it. */
    const link = { down: false };
    const hub = { topics, link };
    hubs.add(hub);
    const delivered: { messages: StoredMessage[]; source: StoredSource }[] = [];
    const relay = createRelay({
      log: testLogger(),
      settings: { announceMs },
      connect: () => ({ end: async () => undefined }) as unknown as Sql,
      deliver: (messages, source) => delivered.push({ messages, source }),
      hub: {
        async notify(topic, payload) {
          const text = JSON.stringify({ t: topic, p: payload });
          if (Buffer.byteLength(text) >= 8000) throw new Error(`payload of ${Buffer.byteLength(text)} bytes: NOTIFY refuses it`);
          sent.push({ from: name, topic, bytes: Buffer.byteLength(text) });
          if (muted.has(name)) return;
          for (const h of hubs) {
            if (!h.link.down) setImmediate(() => h.topics.get(topic)?.forEach((handler) => handler(JSON.parse(text).p)));
          }
        },
        subscribe(topic, handler) {
          if (!topics.has(topic)) topics.set(topic, new Set());
          topics.get(topic)!.add(handler);
          return () => topics.get(topic)!.delete(handler);
        },
        onReconnect(handler) {
          reconnectHandlers.add(handler);
          return () => reconnectHandlers.delete(handler);
        },
      },
    });
    relays.push(relay);
    const reconnect = () => {
      link.down = false;
      reconnectHandlers.forEach((h) => h());
    };
    return { relay, delivered, link, reconnect };
  }
  /** Message notifications sent so far. */
  const stored = () => sent.filter((s) => s.topic === 'messaging.stored').length;
  return { instance, sent, muted, stored };
}

const source = (channelId = CH, subtopic: string | null = null): StoredSource => ({ workspaceId: WS, channelId, subtopic });

/** Two instances, b watching CH (its announcement heard). */
async function watchedPair(t: Test) {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  b.relay.watch(CH);
  await tick();
  return { c, a, b };
}

t.test('messages reach the instance that watches their channel, and only that one', async (t) => {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  const idle = c.instance('idle');
  const unwatch = b.relay.watch(CH);
  await tick();
  const kitchen = [message(1, { subtopic: 'kitchen' }), message(2, { subtopic: 'kitchen' })];
  a.relay.relay(kitchen, source(CH, 'kitchen'));
  await waitUntil(() => b.delivered.length === 1, 1000, 'relayed');
  t.same(b.delivered[0], { messages: kitchen, source: { ...source(CH, 'kitchen'), remote: true } }, 'the messages as stored, marked remote');
  t.equal(a.delivered.length, 0, 'the sender does not deliver its own relay to itself');
  t.equal(idle.delivered.length, 0, 'an instance that watches nothing ignores it');

  const before = c.stored();
  a.relay.relay([message(3)], source(OTHER));
  await tick();
  t.equal(c.stored(), before, 'a channel nobody elsewhere watches is not relayed at all');

  a.relay.relay([message(4)], { ...source(), remote: true });
  await tick();
  t.equal(c.stored(), before, 'a relayed message is not relayed again');

  unwatch();
  await tick();
  a.relay.relay([message(5)], source());
  await tick();
  t.equal(c.stored(), before, 'once the watch is withdrawn, nothing more is sent');
  t.equal(b.delivered.length, 1);
});

t.test('what is committed in one turn goes in as few notifications as fit, in commit order', async (t) => {
  const { c, a, b } = await watchedPair(t);
  // Thirty one-message publishes, one on a subtopic, thirty more: as a busy channel's batch holds them.
  const committed = Array.from({ length: 61 }, (_, i) => message(i, i === 30 ? { subtopic: 'kitchen' } : {}));
  for (const m of committed) a.relay.relay([m], source(CH, m.subtopic));
  await waitUntil(() => b.delivered.flatMap((d) => d.messages).length === 61, 1000, 'all relayed');
  t.ok(c.stored() <= 5, `61 publishes in ${c.stored()} notifications`);
  t.same(b.delivered.map((d) => d.messages), committed.map((m) => [m]), 'delivered as the 61 publishes they were, in commit order, across the subtopic change');
  t.ok(b.delivered.every((d) => d.messages.every((m) => m.subtopic === d.source.subtopic)), "each delivery's source names its messages' subtopic");
});

t.test('watches are counted per channel', async (t) => {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  const first = b.relay.watch(CH);
  const second = b.relay.watch(CH);
  await tick();
  first();
  first();
  await tick();
  a.relay.relay([message(1)], source());
  await waitUntil(() => b.delivered.length === 1, 1000, 'still watched by the second subscriber');
  second();
  await tick();
  a.relay.relay([message(2)], source());
  await tick();
  t.equal(b.delivered.length, 1, 'released by both');
});

t.test('watches begun or ended in one turn are announced together', async (t) => {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  const watches = () => c.sent.filter((s) => s.topic === 'messaging.watch' && s.from === 'b').length;
  const channels = Array.from({ length: 300 }, (_, i) => `6f1c9d2e-5555-4a55-9d55-${String(i).padStart(12, '0')}`);
  const releases = channels.map((ch) => b.relay.watch(ch));
  const brief = b.relay.watch(OTHER);
  brief();
  await tick();
  t.equal(watches(), 3, '300 new watches in two announcements (150 channels each), and the one begun and ended in the turn withdrawn');
  a.relay.relay([message(1, { channel: channels[299]! })], source(channels[299]));
  a.relay.relay([message(2)], source(OTHER));
  await waitUntil(() => b.delivered.length === 1, 1000, 'relayed');
  await tick();
  t.same(b.delivered.map((d) => d.source.channelId), [channels[299]], 'the last of them is watched; one watched and released in the same turn is not');

  for (const release of releases) release();
  await tick();
  t.equal(watches(), 5, 'released together: two withdrawals');
  const before = c.stored();
  a.relay.relay([message(3, { channel: channels[0]! })], source(channels[0]));
  await tick();
  t.equal(c.stored(), before, 'nothing relayed once withdrawn');
});

t.test('a large batch is split under the NOTIFY limit, in order; a message too large alone is left out', async (t) => {
  const { c, a, b } = await watchedPair(t);
  const many = Array.from({ length: 120 }, (_, i) => message(i));
  a.relay.relay([...many, message(999, { value: null, dataValue: 'x'.repeat(RELAY_CHUNK_BYTES) })], source());
  await waitUntil(() => b.delivered.flatMap((d) => d.messages).length >= 120, 1000, 'every chunk relayed');
  await tick();
  t.ok(b.delivered.length > 1, `${b.delivered.length} notifications`);
  t.same(b.delivered.flatMap((d) => d.messages), many, 'all 120, in order, without the oversized one');
  t.ok(c.sent.every((s) => s.bytes < 8000), 'every payload under the limit');

  const { chunks, tooLarge } = chunkPublishes([many], 1000);
  t.equal(tooLarge, 0);
  t.ok(chunks.every((ch) => Buffer.byteLength(JSON.stringify(ch.messages)) + Buffer.byteLength(JSON.stringify(ch.publishes)) <= 1000), 'chunkPublishes keeps each chunk within its bound');
  t.same(chunks.flatMap((ch) => ch.messages), many);
  t.ok(chunks.every((ch) => ch.publishes.length === 1 && ch.publishes[0] === ch.messages.length), 'one publish, split only because it exceeds the bound');
});

t.test('publishes stay whole across notifications: a receiving instance delivers each as it was made', async (t) => {
  const { c, a, b } = await watchedPair(t);
  // Publishes of 1 to 12 messages, 78 in all: more than one notification holds.
  let i = 0;
  const publishes = Array.from({ length: 12 }, (_, k) => Array.from({ length: k + 1 }, () => message(i++)));
  for (const p of publishes) a.relay.relay(p, source());
  await waitUntil(() => b.delivered.flatMap((d) => d.messages).length === i, 1000, 'all relayed');
  t.ok(c.stored() > 1, `${c.stored()} notifications`);
  t.same(b.delivered.map((d) => d.messages), publishes, 'each publish delivered once, whole, in order');

  const { chunks } = chunkPublishes(publishes, 3000);
  t.ok(chunks.length > 2);
  t.same(chunks.flatMap((ch) => publishesOf(ch.messages, ch.publishes)), publishes, 'no publish that fits a notification is split');
  for (const ch of chunks) t.ok(Buffer.byteLength(JSON.stringify(ch.messages)) + Buffer.byteLength(JSON.stringify(ch.publishes)) <= 3000, 'within the bound');
});

t.test('publish counts that do not add up deliver the notification as one publish', async (t) => {
  const m = [message(1), message(2), message(3)];
  t.same(publishesOf(m, [1, 2]), [[message(1)], [message(2), message(3)]]);
  t.same(publishesOf(m, undefined), [m], 'from an instance that sends no counts');
  for (const bad of [[1, 1], [2, 2], [0, 3], [1.5, 1.5], ['3'], {}]) t.same(publishesOf(m, bad), [m], JSON.stringify(bad));
});

t.test('a watch lapses when its instance stops announcing it, and a new instance learns the watches by asking', async (t) => {
  const c = cluster(t);
  const a = c.instance('a', 30);
  const b = c.instance('b', 30);
  b.relay.watch(CH);
  await tick();
  a.relay.relay([message(1)], source());
  await waitUntil(() => b.delivered.length === 1, 1000, 'relayed while announced');

  const late = c.instance('late', 30);
  await late.relay.start();
  await tick();
  late.relay.relay([message(2)], source());
  await waitUntil(() => b.delivered.length === 2, 1000, 'the newcomer relays after asking for the watches');

  c.muted.add('b');
  await tick(150);
  const before = c.stored();
  a.relay.relay([message(3)], source());
  await tick();
  t.equal(c.stored(), before, 'three missed announcements: b is no longer relayed to');
});

t.test('an instance whose LISTEN connection was lost asks for the watches it may have missed', async (t) => {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  a.link.down = true;
  b.relay.watch(CH);
  await tick();
  a.relay.relay([message(1)], source());
  await tick();
  t.equal(c.stored(), 0, 'a missed the announcement: it does not know b watches');
  a.reconnect();
  await tick();
  a.relay.relay([message(2)], source());
  await waitUntil(() => b.delivered.length === 1, 1000, 'relayed after the reconnect');
  t.same(b.delivered[0]?.messages, [message(2)]);
});

t.test('closing withdraws the instance\'s watches at once', async (t) => {
  const c = cluster(t);
  const a = c.instance('a');
  const b = c.instance('b');
  b.relay.watch(CH);
  b.relay.watch(OTHER);
  await tick();
  await b.relay.close();
  await tick();
  const before = c.stored();
  a.relay.relay([message(1)], source());
  a.relay.relay([message(2)], source(OTHER));
  await tick();
  t.equal(c.stored(), before);
});
