// The framed PUBLISH path of MQTT 3.1.1 connections (src/mqtt/publish-lane.ts) from raw sockets: pipelined
// QoS 1 PUBLISHes acknowledged only after storage and in order (PINGREQ between them answered in its place),
// split frames, QoS 0, the frames it leaves to aedes (retained, QoS 2, malformed, oversized, wildcards),
// refusals and storage failures as before, subscribers still receiving, MQTT 5 clients untouched.
import net from 'node:net';
import t from 'tap';
import type { DeviceIdentity } from '../../src/auth/index.js';
import { forbidden, unavailable } from '../../src/errors.js';
import type { Messaging, PublishInput } from '../../src/messaging/index.js';
import { createMqttBroker } from '../../src/mqtt/index.js';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { testLogger } from '../helpers/service.js';
import { insertDevice } from '../messaging/helpers.js';
import { deviceClient, inbox, publish, sleep, subscribe, waitUntil } from './helpers.js';

const WS = '7a1c9d2e-1111-4a55-9d55-000000000001';
const CH = '7a1c9d2e-2222-4a55-9d55-000000000002';
const DENIED = '7a1c9d2e-3333-4a55-9d55-000000000003';
const MAX_PACKET = 4096;

/** A pipeline that stores in order, can hold every publish until released, and can fail. */
function gatedPipeline() {
  const stored: string[] = [];
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => undefined;
  let failing = false;
  const pipeline: Pick<Messaging, 'publishAsDevice' | 'authorizeSubscribe' | 'onStored' | 'watch'> = {
    async publishAsDevice(_device: DeviceIdentity, input: PublishInput) {
      await gate;
      if (failing) throw unavailable('database unavailable', 1);
      if (input.channelId !== CH) throw forbidden();
      stored.push(input.payload.toString());
      return { stored: 1, messages: [] };
    },
    authorizeSubscribe: async (_s, _ws, channelId) => {
      if (channelId !== CH) throw forbidden();
    },
    onStored: () => () => undefined,
    watch: () => () => undefined,
  };
  return {
    pipeline, stored,
    hold() {
      gate = new Promise((r) => { open = r; });
    },
    release: () => open(),
    fail: (on: boolean) => { failing = on; },
  };
}

const str = (s: string) => {
  const b = Buffer.from(s);
  return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
};
function frame(first: number, body: Buffer): Buffer {
  const len: number[] = [];
  let n = body.length;
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    len.push(byte);
  } while (n > 0);
  return Buffer.concat([Buffer.from([first, ...len]), body]);
}
const connectFrame = (id: string, key: string, version = 4) =>
  frame(0x10, Buffer.concat([str('MQTT'), Buffer.from([version, 0xc2, 0, 60]), ...(version === 5 ? [Buffer.from([0])] : []), str(`lane-${Math.random()}`), str(id), str(key)]));
/** PUBLISH: flags are the low nibble of the first byte (DUP 8, QoS << 1, RETAIN 1). */
const publishFrame = (topic: string, payload: string, qos: number, id = 0, flags = 0) =>
  frame(0x30 | (qos << 1) | flags, Buffer.concat([str(topic), qos > 0 ? Buffer.from([id >> 8, id & 0xff]) : Buffer.alloc(0), Buffer.from(payload)]));

interface RawPacket { type: number; flags: number; body: Buffer }

/** A raw MQTT connection: CONNECTed, every packet it receives collected in order. */
async function rawClient(t: { teardown(fn: () => unknown): void }, port: number, device: { id: string; key: string }, version = 4) {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  const packets: RawPacket[] = [];
  let closed = false;
  let pending = Buffer.alloc(0);
  socket.on('close', () => { closed = true; });
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      let len = 0;
      let mul = 1;
      let i = 1;
      for (; i < pending.length && i < 5; i++) {
        len += ((pending[i] as number) & 0x7f) * mul;
        mul *= 128;
        if (((pending[i] as number) & 0x80) === 0) break;
      }
      if (i >= pending.length || i + 1 + len > pending.length) return;
      packets.push({ type: (pending[0] as number) >> 4, flags: (pending[0] as number) & 15, body: pending.subarray(i + 1, i + 1 + len) });
      pending = pending.subarray(i + 1 + len);
    }
  });
  await new Promise((r) => socket.once('connect', r));
  socket.write(connectFrame(device.id, device.key, version));
  await waitUntil(() => packets.length > 0 || closed, 5000, 'CONNACK');
  const connack = packets.shift();
  if (connack?.type !== 2 || connack.body[1] !== 0) throw new Error('CONNECT refused');
  return {
    socket, packets,
    get closed() { return closed; },
    pubackIds: () => packets.filter((p) => p.type === 4).map((p) => p.body.readUInt16BE(0)),
  };
}

t.test('the framed PUBLISH path of MQTT 3.1.1 connections', async (t) => {
  const ts = await startAuthService(t);
  const tenant = await insertTenant(ts, 'mqtt-lane');
  const [a, b] = await Promise.all(['lane-a', 'lane-b'].map((n) => insertDevice(ts, tenant, n)));
  const gated = gatedPipeline();
  const broker = await createMqttBroker({
    auth: ts.service.auth, messaging: gated.pipeline, authz: ts.service.authz, log: testLogger(),
    config: { denyAction: 'ignore', revalidateSecs: 0, maxPacketBytes: MAX_PACKET, maxSubscriptions: 5 },
  });
  t.teardown(() => broker.close(1000));
  const port = await broker.listen('127.0.0.1', 0);
  const topic = `m/${WS}/c/${CH}`;
  const dev = (d: typeof a) => ({ id: d!.id, key: d!.key });

  await t.test('pipelined QoS 1 PUBLISHes: PUBACKs only after storage, in order, a PINGREQ answered in its place', async (t) => {
    const c = await rawClient(t, port, dev(a));
    const before = gated.stored.length;
    gated.hold();
    const frames = [];
    for (let id = 1; id <= 40; id++) frames.push(publishFrame(topic, `[{"n":"p${id}","v":${id}}]`, 1, id));
    frames.splice(20, 0, frame(0xc0, Buffer.alloc(0))); // PINGREQ after the 20th PUBLISH
    c.socket.write(Buffer.concat(frames));
    await sleep(150);
    t.same(c.packets.length, 0, 'nothing answered while the storage has not answered');
    gated.release();
    await waitUntil(() => c.pubackIds().length === 40, 5000, '40 PUBACKs');
    t.same(c.pubackIds(), Array.from({ length: 40 }, (_, i) => i + 1), 'PUBACKs in PUBLISH order');
    t.equal(c.packets.findIndex((p) => p.type === 13), 20, 'PINGRESP after the 20 PUBACKs before it');
    t.same(gated.stored.slice(before), Array.from({ length: 40 }, (_, i) => `[{"n":"p${i + 1}","v":${i + 1}}]`), 'stored in order');
  });

  await t.test('a frame split across reads, and QoS 0 (stored, no PUBACK)', async (t) => {
    const c = await rawClient(t, port, dev(a));
    const before = gated.stored.length;
    const bytes = Buffer.concat([publishFrame(topic, '[{"n":"split","v":1}]', 1, 7), publishFrame(topic, '[{"n":"q0","v":0}]', 0)]);
    for (const byte of bytes) {
      c.socket.write(Buffer.from([byte]));
      await sleep(1);
    }
    await waitUntil(() => gated.stored.length === before + 2, 5000, 'both stored');
    await sleep(50);
    t.same(c.pubackIds(), [7], 'one PUBACK, for the QoS 1 PUBLISH');
    t.notOk(c.closed);
  });

  await t.test('subscribers still receive what the path stored', async (t) => {
    const sub = await deviceClient(t, port, dev(b));
    t.same(await subscribe(sub, topic, 1), [1]);
    const box = inbox(sub);
    const c = await rawClient(t, port, dev(a));
    c.socket.write(publishFrame(topic, '[{"n":"fan","v":3}]', 1, 1));
    const [m] = await box.waitFor(1);
    t.equal(m?.payload, '[{"n":"fan","v":3}]');
  });

  await t.test('retained and QoS 2 PUBLISHes go to aedes: stored, acknowledged, retained kept', async (t) => {
    const c = await rawClient(t, port, dev(a));
    const before = gated.stored.length;
    c.socket.write(publishFrame(topic, '[{"n":"kept","v":1}]', 1, 5, 1));
    c.socket.write(publishFrame(topic, '[{"n":"two","v":2}]', 2, 6));
    await waitUntil(() => c.packets.some((p) => p.type === 5), 5000, 'PUBREC');
    c.socket.write(frame(0x62, Buffer.from([0, 6]))); // PUBREL
    await waitUntil(() => c.packets.some((p) => p.type === 7), 5000, 'PUBCOMP');
    t.same(c.pubackIds(), [5], 'the retained QoS 1 PUBLISH acknowledged');
    t.same(gated.stored.slice(before), ['[{"n":"kept","v":1}]', '[{"n":"two","v":2}]'], 'both stored once');
    const late = await deviceClient(t, port, dev(b));
    const box = inbox(late);
    await subscribe(late, topic, 1);
    const [m] = await box.waitFor(1);
    t.ok(m?.retain && m.payload === '[{"n":"kept","v":1}]', 'a later subscriber gets the retained message');
  });

  await t.test('malformed and oversized frames close the connection; nothing of them is stored', async (t) => {
    const cases: [string, Buffer][] = [
      ['QoS 3', frame(0x36, Buffer.concat([str(topic), Buffer.from([0, 1]), Buffer.from('[]')]))],
      ['a fifth Remaining Length byte', Buffer.from([0x32, 0xff, 0xff, 0xff, 0xff, 0x01])],
      ['a wildcard topic', publishFrame(`m/${WS}/c/#`, '[{"n":"w","v":1}]', 1, 1)],
      ['over the packet size, refused at its header', Buffer.from([0x32, 0x80, 0x80, 0x04])],
    ];
    for (const [what, bytes] of cases) {
      const c = await rawClient(t, port, dev(a));
      const before = gated.stored.length;
      c.socket.write(bytes);
      await waitUntil(() => c.closed, 5000, `${what}: closed`);
      t.equal(c.pubackIds().length, 0, `${what}: no PUBACK`);
      t.equal(gated.stored.length, before, `${what}: nothing stored`);
    }
    const ok = await rawClient(t, port, dev(a));
    ok.socket.write(publishFrame(topic, '[{"n":"after","v":1}]', 1, 9));
    await waitUntil(() => ok.pubackIds().length === 1, 5000, 'the broker keeps serving');
    t.pass('the broker keeps serving');
  });

  await t.test('refusals as before: ignore acknowledges unstored; a storage failure closes without PUBACK', async (t) => {
    const c = await rawClient(t, port, dev(a));
    const sub = await deviceClient(t, port, dev(b));
    await subscribe(sub, topic, 1);
    const box = inbox(sub);
    const before = gated.stored.length;
    c.socket.write(publishFrame(`m/${WS}/c/${DENIED}`, '[{"n":"no","v":1}]', 1, 3));
    await waitUntil(() => c.pubackIds().length === 1, 5000, 'PUBACK under ignore');
    t.equal(gated.stored.length, before, 'the refused one is not stored');
    gated.fail(true);
    try {
      c.socket.write(publishFrame(topic, '[{"n":"lost","v":1}]', 1, 4));
      await waitUntil(() => c.closed, 5000, 'closed');
      t.same(c.pubackIds(), [3], 'no PUBACK for what was not stored');
    } finally {
      gated.fail(false);
    }
    await sleep(100);
    t.same(box.messages.filter((m) => !m.retain), [], 'nothing forwarded (the retained message of before aside)');
  });

  await t.test('MQTT 5 clients keep aedes: a refused publish gets PUBACK 0x87', async (t) => {
    const c = await rawClient(t, port, dev(a), 5);
    c.socket.write(frame(0x32, Buffer.concat([str(`m/${WS}/c/${DENIED}`), Buffer.from([0, 2, 0]), Buffer.from('[]')])));
    await waitUntil(() => c.packets.some((p) => p.type === 4), 5000, 'PUBACK');
    const ack = c.packets.find((p) => p.type === 4);
    t.equal(ack?.body[2], 0x87, 'reason code: not authorized');
  });

  // aedes holds PUBLISHes that arrive in the CONNECT's write until the client is connected.
  await t.test('PUBLISHes sent in the CONNECT write are answered', async (t) => {
    const before = gated.stored.length;
    const socket = net.connect(port, '127.0.0.1');
    t.teardown(() => socket.destroy());
    const received: Buffer[] = [];
    socket.on('data', (d: Buffer) => received.push(d));
    await new Promise((r) => socket.once('connect', r));
    socket.write(Buffer.concat([connectFrame(a!.id, a!.key), publishFrame(topic, '[{"n":"e1","v":1}]', 1, 1), publishFrame(topic, '[{"n":"e2","v":2}]', 1, 2)]));
    await waitUntil(() => Buffer.concat(received).length >= 4 + 8, 5000, 'CONNACK and two PUBACKs');
    await sleep(100);
    t.same([...Buffer.concat(received)], [0x20, 2, 0, 0, 0x40, 2, 0, 1, 0x40, 2, 0, 2], 'CONNACK, then both PUBACKs in order');
    socket.write(publishFrame(topic, '[{"n":"e3","v":3}]', 1, 3));
    await waitUntil(() => Buffer.concat(received).length >= 16, 5000, 'third PUBACK');
    t.same(gated.stored.slice(before), ['[{"n":"e1","v":1}]', '[{"n":"e2","v":2}]', '[{"n":"e3","v":3}]']);
  });
});
