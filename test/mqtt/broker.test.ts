// The MQTT broker against real auth (shared keys in PostgreSQL) and a scripted pipeline: CONNECT refusals,
// publish refusal semantics, subscribe filters, QoS 1, retained messages, persistent sessions, fan-out of
// HTTP messages, transient storage failures and the counters. The real pipeline: integration.test.ts.
import net from 'node:net';
import t from 'tap';
import type { DeviceIdentity } from '../../src/auth/index.js';
import { forbidden, invalidInput, unavailable } from '../../src/errors.js';
import type { Messaging, PublishInput, StoredListener, StoredMessage } from '../../src/messaging/index.js';
import { createMqttBroker, type MqttBroker } from '../../src/mqtt/index.js';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { testLogger } from '../helpers/service.js';
import { insertDevice } from '../messaging/helpers.js';
import { connect, deviceClient, inbox, publish, sleep, subscribe, waitUntil } from './helpers.js';

const WS = '6f1c9d2e-1111-4a55-9d55-000000000001';
const CH = '6f1c9d2e-2222-4a55-9d55-000000000002';
const OTHER = '6f1c9d2e-3333-4a55-9d55-000000000003';

/** A pipeline whose decisions are a set of `${entity}:${channel}:${action}` and that keeps what it stores. */
function scriptedPipeline() {
  const grants = new Set<string>();
  const stored: { device: string; input: PublishInput }[] = [];
  const listeners = new Set<StoredListener>();
  /** Channels watched for other instances' messages, with their hold counts. */
  const watched = new Map<string, number>();
  let failing = false;
  const pipeline: Pick<Messaging, 'publishAsDevice' | 'authorizeSubscribe' | 'onStored' | 'watch'> = {
    async publishAsDevice(device: DeviceIdentity, input: PublishInput) {
      if (failing) throw unavailable('database unavailable', 1);
      if (!grants.has(`${device.entityId}:${input.channelId}:publish`)) throw forbidden();
      let records: { n: string; v: number }[];
      try {
        records = JSON.parse(input.payload.toString());
      } catch {
        throw invalidInput('malformed JSON');
      }
      stored.push({ device: device.entityId, input });
      const messages = records.map((r) => message(input.channelId, device.entityId, input.protocol, r));
      for (const l of listeners) l(messages, { workspaceId: input.workspaceId, channelId: input.channelId, subtopic: input.subtopic ?? null });
      return { stored: messages.length, messages };
    },
    async authorizeSubscribe(subject, _ws, channelId) {
      const id = 'device' in subject ? subject.device.entityId : subject.principal.entityId;
      if (!grants.has(`${id}:${channelId}:subscribe`)) throw forbidden();
    },
    onStored(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    watch(channelId) {
      watched.set(channelId, (watched.get(channelId) ?? 0) + 1);
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        const left = (watched.get(channelId) ?? 1) - 1;
        if (left > 0) watched.set(channelId, left);
        else watched.delete(channelId);
      };
    },
  };
  /** Another instance's publish, as the relay delivers it here. */
  const remote = (protocol: StoredMessage['protocol'], channelId: string, records: { n: string; v: number }[]) => {
    const messages = records.map((r) => message(channelId, 'elsewhere', protocol, r));
    for (const l of listeners) l(messages, { workspaceId: WS, channelId, subtopic: null, remote: true });
  };
  return { pipeline, grants, stored, listeners, watched, remote, fail: (on: boolean) => { failing = on; } };
}

function message(channel: string, publisher: string, protocol: StoredMessage['protocol'], r: { n: string; v: number }): StoredMessage {
  return { channel, publisher, protocol, subtopic: null, name: r.n, unit: null, time: 1, value: r.v, stringValue: null, boolValue: null, dataValue: null, sum: null };
}

t.test('MQTT broker hooks, delivery and sessions', async (t) => {
  const ts = await startAuthService(t);
  const tenant = await insertTenant(ts, 'mqtt-fleet');
  const [a, b, c] = await Promise.all(['dev-a', 'dev-b', 'dev-c'].map((n) => insertDevice(ts, tenant, n)));
  const script = scriptedPipeline();
  script.grants.add(`${a!.id}:${CH}:publish`).add(`${a!.id}:${CH}:subscribe`).add(`${b!.id}:${CH}:subscribe`).add(`${c!.id}:${CH}:subscribe`);
  const broker: MqttBroker = await createMqttBroker({
    auth: ts.service.auth, messaging: script.pipeline, authz: ts.service.authz, log: testLogger(),
    config: { denyAction: 'ignore', revalidateSecs: 0, maxPacketBytes: 64 * 1024, maxSubscriptions: 5 },
  });
  t.teardown(() => broker.close(1000));
  const port = await broker.listen('127.0.0.1', 0);
  const topic = `m/${WS}/c/${CH}`;

  await t.test('CONNECT: key is the password, entity id the username', async (t) => {
    await t.rejects(connect(t, port, { username: a!.id, password: 'not-the-key-at-all' }), { code: 4 }, 'wrong key: bad username or password');
    await t.rejects(connect(t, port, { username: b!.id, password: a!.key }), { code: 4 }, "another device's key");
    await t.rejects(connect(t, port, {}), { code: 4 }, 'no credentials');
    await t.resolves(deviceClient(t, port, a!), 'id + own key');
  });

  await t.test('a packet over maxPacketBytes closes the connection at its header, before or after CONNECT', async (t) => {
    // A CONNECT declaring 100 MiB from a client that never authenticated: nothing of it is buffered.
    const raw = net.connect(port, '127.0.0.1');
    await new Promise((r) => raw.once('connect', r));
    let closed = false;
    raw.on('close', () => { closed = true; });
    raw.on('error', () => undefined);
    raw.write(Buffer.from([0x10, 0x80, 0x80, 0x80, 0x32])); // remaining length 0x32 << 21 = 100 MiB
    raw.write(Buffer.alloc(1024, 0x61));
    await waitUntil(() => closed, 3000, 'the oversized CONNECT closed');
    t.ok(closed, 'closed after the fixed header');

    const sender = await deviceClient(t, port, a!);
    const gone = new Promise<void>((r) => sender.once('close', () => r()));
    sender.publish(topic, Buffer.alloc(70 * 1024, 0x61), { qos: 1 });
    await gone;
    t.pass('a 70 KiB PUBLISH over the 64 KiB limit closes its connection');
    t.notOk(script.stored.some((s) => s.input.payload.length >= 70 * 1024), 'and nothing of it is stored');
  });

  await t.test('a client holds at most maxSubscriptions filters; one it holds may be renewed', async (t) => {
    const client = await deviceClient(t, port, b!);
    for (let i = 0; i < 5; i++) t.same(await subscribe(client, `${topic}/s${i}`, 1), [1], `filter ${i + 1} of 5`);
    t.same(await subscribe(client, `${topic}/s5`, 1), [128], 'a sixth is refused (0x80)');
    t.same(await subscribe(client, `${topic}/s0`, 0), [0], 'renewing a held one is not a new one');
    await new Promise<void>((r) => client.end(true, {}, () => r()));
  });

  await t.test('one SUBSCRIBE of many filters stays within the bound too (its filters are decided together)', async (t) => {
    const client = await deviceClient(t, port, b!);
    t.same(await subscribe(client, Array.from({ length: 8 }, (_, i) => `${topic}/p${i}`), 1), [1, 1, 1, 1, 1, 128, 128, 128], 'five granted, three refused');
    t.same(await subscribe(client, `${topic}/p9`, 1), [128], 'and none beyond afterwards');
    t.same(await subscribe(client, `${topic}/p0`, 0), [0], 'a held one may be renewed');
    await new Promise<void>((r) => client.unsubscribe(`${topic}/p1`, () => r()));
    t.same(await subscribe(client, `${topic}/p9`, 1), [1], 'an UNSUBSCRIBE makes room');
    await new Promise<void>((r) => client.end(true, {}, () => r()));
  });

  await t.test('QoS 1 publish is stored before it is acknowledged and forwarded', async (t) => {
    const sub = await deviceClient(t, port, b!);
    t.same(await subscribe(sub, `${topic}/#`, 1), [1]);
    const box = inbox(sub);
    const pub = await deviceClient(t, port, a!);
    await publish(pub, `${topic}/temp`, JSON.stringify([{ n: 'temp', v: 21 }]), { qos: 1 });
    t.equal(script.stored.at(-1)?.input.subtopic, 'temp', 'stored (with its subtopic) when PUBACK arrived');
    t.equal(script.stored.at(-1)?.input.protocol, 'mqtt');
    const [got] = await box.waitFor(1);
    t.match(got, { topic: `${topic}/temp`, qos: 1, payload: JSON.stringify([{ n: 'temp', v: 21 }]) });
  });

  await t.test('refused publishes are acknowledged and dropped (ignore), nothing stored or forwarded', async (t) => {
    const sub = await deviceClient(t, port, c!);
    await subscribe(sub, topic, 1);
    const box = inbox(sub);
    const pub = await deviceClient(t, port, b!);
    const before = script.stored.length;
    const snap0 = await broker.snapshot();
    await publish(pub, topic, JSON.stringify([{ n: 'x', v: 1 }]), { qos: 1 });
    await publish(pub, `m/${WS}/c/not-a-uuid`, '[]', { qos: 1 });
    await publish(pub, 'sensors/raw', '[]', { qos: 0 });
    const a1 = await deviceClient(t, port, a!);
    await publish(a1, topic, 'not json', { qos: 1 });
    await sleep(100);
    t.equal(script.stored.length, before, 'nothing stored');
    t.equal(box.messages.length, 0, 'nothing forwarded');
    t.ok(pub.connected && a1.connected, 'clients stay connected');
    const snap = await broker.snapshot();
    t.equal(snap.errors.authz - snap0.errors.authz, 3, 'no grant, bad channel id, topic outside m/...');
    t.equal(snap.errors.packet - snap0.errors.packet, 1, 'invalid payload');
  });

  await t.test('subscribe filters stay within a channel the device may subscribe to', async (t) => {
    const sub = await deviceClient(t, port, b!);
    t.same(await subscribe(sub, [topic, `${topic}/+/x`, `m/${WS}/c/${OTHER}`, `m/${WS}/c/+`, `m/+/c/${CH}`, '#', '$SYS/#'], 1),
      [1, 1, 128, 128, 128, 128, 128]);
    t.same(await subscribe(sub, topic, 2), [2], 'QoS 2 granted');
  });

  await t.test('retained message reaches a late subscriber', async (t) => {
    const pub = await deviceClient(t, port, a!);
    await publish(pub, `${topic}/state`, JSON.stringify([{ n: 'state', v: 1 }]), { qos: 1, retain: true });
    const late = await deviceClient(t, port, c!);
    const box = inbox(late);
    await subscribe(late, `${topic}/state`, 1);
    const [got] = await box.waitFor(1);
    t.match(got, { topic: `${topic}/state`, retain: true });
    t.equal((await broker.snapshot()).subscriptions.retained_messages, 1);
  });

  await t.test('persistent session receives what was published while offline', async (t) => {
    const clientId = `persistent-${Date.now()}`;
    const first = await deviceClient(t, port, b!, { clientId, clean: false });
    await subscribe(first, topic, 1);
    await new Promise<void>((r) => first.end(false, {}, () => r()));
    const pub = await deviceClient(t, port, a!);
    await publish(pub, topic, JSON.stringify([{ n: 'offline', v: 7 }]), { qos: 1 });
    const again = await deviceClient(t, port, b!, { clientId, clean: false });
    const box = inbox(again);
    const [got] = await box.waitFor(1);
    t.equal(JSON.parse(got!.payload)[0].n, 'offline');
    t.ok((await broker.snapshot()).sessions.total >= 1);
  });

  await t.test('a resumed session keeps only what its device may still subscribe to', async (t) => {
    const d = await insertDevice(ts, tenant, 'dev-d');
    script.grants.add(`${d.id}:${CH}:subscribe`);
    const clientId = `resumed-${Date.now()}`;
    const first = await deviceClient(t, port, d, { clientId, clean: false });
    t.same(await subscribe(first, topic, 1), [1]);
    await new Promise<void>((r) => first.end(false, {}, () => r()));
    script.grants.delete(`${d.id}:${CH}:subscribe`);
    const pub = await deviceClient(t, port, a!);
    await publish(pub, topic, JSON.stringify([{ n: 'while-offline', v: 1 }]), { qos: 1 });
    const again = await deviceClient(t, port, d, { clientId, clean: false });
    const box = inbox(again);
    await publish(pub, topic, JSON.stringify([{ n: 'after-resuming', v: 2 }]), { qos: 1 });
    await sleep(300);
    t.same(box.messages.map((m) => JSON.parse(m.payload)[0].n), [], 'neither what was queued offline nor what came after');
    script.grants.add(`${d.id}:${CH}:subscribe`);
    t.same(await subscribe(again, topic, 1), [1], 'subscribing again is decided afresh');
    await publish(pub, topic, JSON.stringify([{ n: 'granted-again', v: 3 }]), { qos: 1 });
    t.match((await box.waitFor(1))[0], { topic });
    await new Promise<void>((r) => again.end(true, {}, () => r()));
    // A clean CONNECT discards the session, so the session counts below are those of the other tests.
    const discard = await deviceClient(t, port, d, { clientId, clean: true });
    await new Promise<void>((r) => discard.end(true, {}, () => r()));
  });

  await t.test('a client id is scoped by device: no takeover of, and no messages from, another device session', async (t) => {
    const clientId = 'shared-name';
    const owner = await deviceClient(t, port, b!, { clientId, clean: false });
    await subscribe(owner, topic, 1);
    let kicked = false;
    owner.once('close', () => { kicked = true; });
    const other = await deviceClient(t, port, c!, { clientId, clean: false });
    await sleep(100);
    t.notOk(kicked, "the other device's CONNECT with the same id left this session alone");
    await new Promise<void>((r) => owner.end(false, {}, () => r()));
    const pub = await deviceClient(t, port, a!);
    await publish(pub, topic, JSON.stringify([{ n: 'for-owner', v: 1 }]), { qos: 1 });
    await new Promise<void>((r) => other.end(false, {}, () => r()));
    const impostor = await deviceClient(t, port, c!, { clientId, clean: false });
    const box = inbox(impostor);
    const back = await deviceClient(t, port, b!, { clientId, clean: false });
    const ownBox = inbox(back);
    await ownBox.waitFor(1);
    await sleep(100);
    t.equal(box.messages.length, 0, "the other device does not get the owner's queued message");
    await new Promise<void>((r) => back.end(true, {}, () => r()));
  });

  await t.test('HTTP and CoAP messages are delivered to MQTT subscribers as resolved SenML', async (t) => {
    const sub = await deviceClient(t, port, b!);
    await subscribe(sub, `${topic}/room`, 1);
    await subscribe(sub, topic, 1);
    const box = inbox(sub);
    for (const l of script.listeners) {
      l([message(CH, a!.id, 'http', { n: 'http-temp', v: 3 })], { workspaceId: WS, channelId: CH, subtopic: 'room' });
      l([message(CH, a!.id, 'mqtt', { n: 'loop', v: 0 })], { workspaceId: WS, channelId: CH, subtopic: null });
    }
    const [got] = await box.waitFor(1);
    t.equal(got!.topic, `${topic}/room`);
    t.same(JSON.parse(got!.payload), [{ n: 'http-temp', t: 1, v: 3 }]);
    await sleep(100);
    t.equal(box.messages.length, 1, 'MQTT-originated messages are not published twice');
  });

  await t.test('storage unavailable: no PUBACK, the connection closes so the client resends', async (t) => {
    const pub = await deviceClient(t, port, a!);
    script.fail(true);
    const closed = new Promise<void>((r) => pub.once('close', () => r()));
    let acked = false;
    pub.publish(topic, JSON.stringify([{ n: 'lost?', v: 1 }]), { qos: 1 }, (err) => { acked = !err; });
    await closed;
    script.fail(false);
    await sleep(50);
    t.notOk(acked, 'not acknowledged');
  });

  await t.test('storage unavailable, MQTT 5: DISCONNECT 0x89 (server busy) and no PUBACK', async (t) => {
    const pub = await deviceClient(t, port, a!, { protocolVersion: 5 });
    script.fail(true);
    const reason = new Promise<number>((r) => pub.once('disconnect', (packet) => r(packet.reasonCode ?? 0)));
    let acked = false;
    pub.publish(topic, JSON.stringify([{ n: 'lost?', v: 1 }]), { qos: 1 }, (err) => { acked = !err; });
    t.equal(await reason, 0x89, 'the reason is given');
    script.fail(false);
    await sleep(50);
    t.notOk(acked, 'not acknowledged: the client sends it again after reconnecting');
  });

  await t.test('counters', async (t) => {
    const live = await deviceClient(t, port, c!);
    await subscribe(live, [topic, `${topic}/x`], 1);
    const s = await broker.snapshot();
    t.equal(s.connections.current, 1);
    t.equal(s.connections.total - s.connections.disconnections, 1);
    t.equal(s.subscriptions.active, 2);
    t.same(s.sessions, { connected: 1, total: 3 }, 'this client and the two persistent sessions with subscriptions of earlier tests');
    t.ok(s.connections.total >= 10 && s.connections.current >= 1);
    t.ok(s.messages.publish_received >= 5 && s.messages.publish_sent >= 4);
    t.ok(s.messages.received > s.messages.publish_received && s.messages.sent > s.messages.publish_sent);
    t.ok(s.bytes.received > 0 && s.bytes.sent > 0);
    t.ok(s.errors.auth >= 3);
    t.ok(s.subscriptions.active >= 1);
  });
});

t.test('connected clients are re-checked: a withdrawn subscribe grant closes the connection', async (t) => {
  const ts = await startAuthService(t);
  const tenant = await insertTenant(ts, 'recheck-fleet');
  const d = await insertDevice(ts, tenant, 'watcher');
  const script = scriptedPipeline();
  script.grants.add(`${d.id}:${CH}:subscribe`);
  const broker = await createMqttBroker({
    auth: ts.service.auth, messaging: script.pipeline, authz: ts.service.authz, log: testLogger(),
    config: { denyAction: 'ignore', revalidateSecs: 1, maxPacketBytes: 64 * 1024, maxSubscriptions: 5 },
  });
  t.teardown(() => broker.close(1000));
  const port = await broker.listen('127.0.0.1', 0);
  const client = await deviceClient(t, port, d);
  t.same(await subscribe(client, `m/${WS}/c/${CH}`, 1), [1]);
  const closed = new Promise<void>((r) => client.once('close', () => r()));
  await sleep(1200);
  t.ok(client.connected, 'still allowed: still connected');
  script.grants.delete(`${d.id}:${CH}:subscribe`);
  await closed;
  t.pass('closed within the re-check interval');
});

t.test("without a shared backend, the channels subscriptions cover stay watched, and other instances' publishes reach them", async (t) => {
  const ts = await startAuthService(t);
  const tenant = await insertTenant(ts, 'watch-fleet');
  const [d, p] = await Promise.all(['watcher', 'publisher'].map((n) => insertDevice(ts, tenant, n)));
  const script = scriptedPipeline();
  script.grants.add(`${d!.id}:${CH}:subscribe`).add(`${d!.id}:${OTHER}:subscribe`).add(`${p!.id}:${CH}:publish`);
  const broker = await createMqttBroker({
    auth: ts.service.auth, messaging: script.pipeline, authz: ts.service.authz, log: testLogger(),
    config: { denyAction: 'ignore', revalidateSecs: 0, maxPacketBytes: 64 * 1024, maxSubscriptions: 5 },
  });
  t.teardown(() => broker.close(1000));
  const port = await broker.listen('127.0.0.1', 0);
  const topic = `m/${WS}/c/${CH}`;
  const watches = () => Object.fromEntries(script.watched);
  const closeClient = (c: Awaited<ReturnType<typeof deviceClient>>) => new Promise<void>((r) => c.end(false, {}, () => r()));

  await t.test('a connected client: held per filter, until UNSUBSCRIBE or the connection ends', async (t) => {
    const client = await deviceClient(t, port, d!);
    t.same(await subscribe(client, [topic, `${topic}/#`, `m/${WS}/c/${OTHER}`], 1), [1, 1, 1]);
    t.same(watches(), { [CH]: 2, [OTHER]: 1 });
    t.same(await subscribe(client, topic, 0), [0], 'renewing a filter');
    t.same(watches(), { [CH]: 2, [OTHER]: 1 }, 'still held once per filter');
    t.same(await subscribe(client, `m/${WS}/c/6f1c9d2e-4444-4a55-9d55-000000000004`, 1), [128], 'a channel it may not subscribe to');
    t.same(watches(), { [CH]: 2, [OTHER]: 1 }, 'a refused filter is not watched');
    await new Promise<void>((r) => client.unsubscribe(`${topic}/#`, () => r()));
    t.same(watches(), { [CH]: 1, [OTHER]: 1 }, 'released by UNSUBSCRIBE');
    await closeClient(client);
    await waitUntil(() => script.watched.size === 0, 2000, 'released when the client left');
    t.same(watches(), {});
  });

  await t.test("another instance's publishes reach subscribers here, each as one PUBLISH, whatever their protocol", async (t) => {
    const client = await deviceClient(t, port, d!);
    await subscribe(client, topic, 1);
    const box = inbox(client);
    script.remote('http', CH, [{ n: 'h1', v: 1 }, { n: 'h2', v: 2 }]);
    script.remote('mqtt', CH, [{ n: 'm1', v: 3 }]);
    script.remote('coap', OTHER, [{ n: 'elsewhere', v: 4 }]);
    const got = await box.waitFor(2);
    await sleep(100);
    t.same(got.map((m) => JSON.parse(m.payload).map((r: { n: string }) => r.n)), [['h1', 'h2'], ['m1']], 'in order, one PUBLISH per publish, nothing of a channel not subscribed');
    t.ok(got.every((m) => m.topic === topic && m.qos === 1));

    // A publish made here through MQTT is forwarded by aedes once, not again by the fan-out.
    const pub = await deviceClient(t, port, p!);
    await publish(pub, topic, JSON.stringify([{ n: 'local', v: 5 }]), { qos: 1 });
    await sleep(100);
    t.same(box.messages.map((m) => JSON.parse(m.payload)[0].n), ['h1', 'm1', 'local'], 'a local MQTT publish once');
    await closeClient(client);
    await closeClient(pub);
  });

  await t.test('a persistent session: held while it is away, and what arrives meanwhile is queued for it', async (t) => {
    await waitUntil(() => script.watched.size === 0, 2000, 'nothing held from before');
    const clientId = `away-${Date.now()}`;
    const first = await deviceClient(t, port, d!, { clientId, clean: false });
    const refused = `m/${WS}/c/6f1c9d2e-4444-4a55-9d55-000000000004`;
    t.same(await subscribe(first, [topic, refused], 1), [1, 128]);
    t.same(watches(), { [CH]: 2 }, 'the connection and the stored session; the refused filter neither stored nor watched');
    await closeClient(first);
    await waitUntil(() => script.watched.get(CH) === 1, 2000, 'the connection released it');
    script.remote('http', CH, [{ n: 'while-away', v: 6 }]);
    const again = await deviceClient(t, port, d!, { clientId, clean: false });
    const box = inbox(again);
    t.same((await box.waitFor(1)).map((m) => JSON.parse(m.payload)[0].n), ['while-away'], 'delivered on return');
    t.same(watches(), { [CH]: 2 }, 'the restored subscription is held again');
    await closeClient(again);
    const discard = await deviceClient(t, port, d!, { clientId, clean: true });
    await waitUntil(() => script.watched.size === 0, 2000, 'a clean CONNECT discards the session and its watch');
    t.same(watches(), {});
    await closeClient(discard);
  });

  await t.test('closing the broker releases every watch', async (t) => {
    const clientId = `kept-${Date.now()}`;
    const client = await deviceClient(t, port, d!, { clientId, clean: false });
    await subscribe(client, topic, 1);
    await closeClient(client);
    t.same(watches(), { [CH]: 1 });
    await broker.close(1000);
    t.same(watches(), {});
  });
});
