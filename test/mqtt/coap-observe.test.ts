// CoAP Observe (RFC 7641) on the CoAP listener, over real UDP from a raw client so that every option,
// code and message type can be asserted: registration and its refusals, notifications of stored messages
// (channel-wide and per subtopic, split to fit a datagram), deregistration by GET and by RST, the limits,
// revalidation and shutdown. The pipeline behind is a stand-in here; integration.test.ts runs the real one.
import dgram from 'node:dgram';
import { generate, parse, type ParsedPacket } from 'coap-packet';
import t, { type Test } from 'tap';
import { CONFIRMABLE_EVERY, NOTIFICATION_BYTES, packsOf } from '../../src/coap/index.js';
import type { DeviceIdentity } from '../../src/auth/index.js';
import { forbidden, notFound } from '../../src/errors.js';
import type { StoredListener, StoredMessage } from '../../src/messaging/index.js';
import { coapServer, waitUntil } from './helpers.js';

const WS = '6f1c9d2e-1111-4a55-9d55-000000000001';
const CH = '6f1c9d2e-2222-4a55-9d55-000000000002';
const OTHER_CH = '6f1c9d2e-2222-4a55-9d55-000000000003';

const device = (entityId: string): DeviceIdentity => ({ entityId, tenantId: WS, kind: 'device', status: 'active', credentialId: `cred-${entityId}` });

function message(name: string, value: number, extra: Partial<StoredMessage> = {}): StoredMessage {
  return {
    channel: CH, publisher: 'dev-pub', protocol: 'http', subtopic: null, name, unit: 'Cel', time: 1_700_000_000.5, value,
    stringValue: null, boolValue: null, dataValue: null, sum: null, ...extra,
  };
}

/**
 * A server whose stand-in pipeline knows two keys (good → dev-a, other → dev-b; 'no-grant' is a device
 * refused subscribe) and lets the test fire stored messages.
 */
async function observedServer(t: Test, limits: { maxObservations?: number; maxPerDevice?: number; revalidateSecs?: number } = {}) {
  const listeners = new Set<StoredListener>();
  const keys = new Map<string, DeviceIdentity>([['good', device('dev-a')], ['other', device('dev-b')], ['no-grant', device('dev-c')]]);
  const server = coapServer({
    observe: { maxObservations: limits.maxObservations ?? 100, maxPerDevice: limits.maxPerDevice ?? 100, revalidateSecs: limits.revalidateSecs ?? 0 },
    authenticateDeviceKey: async (key) => keys.get(key) ?? null,
    messaging: {
      async authorizeSubscribe(subject, workspaceId, channelId) {
        if (workspaceId !== WS || (channelId !== CH && channelId !== OTHER_CH)) throw notFound('channel');
        if ('device' in subject && subject.device.entityId === 'dev-c') throw forbidden();
      },
      onStored(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    },
  });
  const port = await server.listen('127.0.0.1', 0);
  t.teardown(() => server.close(1000));
  const store = (messages: StoredMessage[], channelId = CH, subtopic: string | null = null) => {
    for (const l of listeners) l(messages, { workspaceId: WS, channelId, subtopic });
  };
  return { server, port, keys, store };
}

/** One UDP endpoint speaking raw CoAP: every datagram it receives is queued; CON ones can be ACKed. */
function peer(t: Test, port: number) {
  const sock = dgram.createSocket('udp4');
  t.teardown(() => sock.close());
  const received: ParsedPacket[] = [];
  const waiting: (() => void)[] = [];
  sock.on('message', (m) => {
    received.push(parse(m));
    waiting.splice(0).forEach((wake) => wake());
  });
  let messageId = 100;
  return {
    send(packet: Parameters<typeof generate>[0]) {
      const id = packet.messageId ?? ++messageId;
      sock.send(generate({ ...packet, messageId: id }), port, '127.0.0.1');
      return id;
    },
    /** The next datagram, or null after ms. */
    async next(ms = 2000): Promise<ParsedPacket | null> {
      const until = Date.now() + ms;
      while (received.length === 0) {
        const left = until - Date.now();
        if (left <= 0) return null;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiting.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return received.shift()!;
    },
    ack(packet: ParsedPacket) {
      sock.send(generate({ messageId: packet.messageId, code: '0.00', ack: true, token: Buffer.alloc(0) }), port, '127.0.0.1');
    },
    reset(packet: ParsedPacket) {
      sock.send(generate({ messageId: packet.messageId, code: '0.00', reset: true, token: Buffer.alloc(0) }), port, '127.0.0.1');
    },
  };
}

type Peer = ReturnType<typeof peer>;

const pathOptions = (...segments: string[]) => segments.map((s) => ({ name: 'Uri-Path' as const, value: Buffer.from(s) }));
const observeValue = (p: ParsedPacket) => {
  const o = p.options.find((x) => x.name === 'Observe');
  return o === undefined ? undefined : o.value.length === 0 ? 0 : o.value.readUIntBE(0, o.value.length);
};
const option = (p: ParsedPacket, name: string) => p.options.find((x) => x.name === name)?.value;

/** GET with Observe (0 registers, 1 deregisters) on /m/WS/c/<channel>[/<subtopic>]. */
function observe(p: Peer, token: number, opts: { key?: string; channel?: string; subtopic?: string[]; observe?: 0 | 1; confirmable?: boolean } = {}) {
  const query = opts.key === undefined ? [] : [{ name: 'Uri-Query' as const, value: Buffer.from(`auth=${opts.key}`) }];
  return p.send({
    token: Buffer.from([token]), code: '0.01', confirmable: opts.confirmable ?? true,
    options: [
      { name: 'Observe', value: opts.observe === 1 ? Buffer.of(1) : Buffer.alloc(0) },
      ...pathOptions('m', WS, 'c', opts.channel ?? CH, ...(opts.subtopic ?? [])),
      ...query,
    ],
  });
}

/** Registers and returns the 2.05 that opened the observation. */
async function register(t: Test, p: Peer, token: number, opts: Parameters<typeof observe>[2] = {}) {
  observe(p, token, { key: 'good', ...opts });
  const opened = await p.next();
  t.equal(opened?.code, '2.05', `registration ${token} accepted`);
  return opened!;
}

t.test('packsOf fills each pack up to the limit and skips what cannot fit alone', async (t) => {
  const records = Array.from({ length: 40 }, (_, i) => ({ n: `urn:dev:sensor:${i}`, v: i, t: 1_700_000_000 }));
  const { packs, tooLarge } = packsOf([...records, { n: 'huge', vs: 'x'.repeat(2000) }], 300);
  t.equal(tooLarge, 1);
  t.ok(packs.every((p) => p.length <= 300), 'every pack within the limit');
  t.same(packs.flatMap((p) => JSON.parse(p.toString())), records, 'every record once, in order');
  const firstOf = (p: Buffer) => JSON.stringify(JSON.parse(p.toString())[0]);
  t.ok(packs.slice(0, -1).every((p, i) => p.length + 1 + firstOf(packs[i + 1]!).length > 300), 'a pack closes only when the next record would not fit');
  t.same(packsOf([], 300), { packs: [], tooLarge: 0 });
});

t.test('registration, notifications and deregistration', async (t) => {
  const { port, store } = await observedServer(t);
  const p = peer(t, port);

  const opened = await register(t, p, 1);
  t.equal(opened.ack, true, 'piggybacked on the ACK of the confirmable GET');
  t.equal(observeValue(opened), 1, 'carries Observe');
  t.same(option(opened, 'Content-Format'), Buffer.of(110), 'application/senml+json');
  t.equal(opened.payload.toString(), '[]', 'a channel has no current state: an empty pack');

  store([message('urn:dev:a:temp', 21.5), message('urn:dev:a:hum', 40, { unit: '%RH', updateTime: 60 })]);
  const first = await p.next();
  t.equal(first?.code, '2.05');
  t.equal(first?.confirmable, true, 'confirmable like the registration');
  t.equal(observeValue(first!), 2, 'Observe counts up');
  t.same(option(first!, 'Content-Format'), Buffer.of(110));
  t.same(JSON.parse(first!.payload.toString()), [
    { n: 'urn:dev:a:temp', t: 1_700_000_000.5, u: 'Cel', v: 21.5 },
    { n: 'urn:dev:a:hum', t: 1_700_000_000.5, u: '%RH', v: 40, ut: 60 },
  ], 'resolved SenML records');
  p.ack(first!);

  store([message('urn:dev:x:temp', 1)], OTHER_CH);
  t.equal(await p.next(300), null, 'another channel is not notified');

  store([message('urn:dev:a:temp', 22)], CH, 'kitchen');
  const sub = await p.next();
  t.same(JSON.parse(sub!.payload.toString()), [{ n: 'urn:dev:a:temp', t: 1_700_000_000.5, u: 'Cel', v: 22 }], 'a subtopic message reaches the channel-wide observer');
  p.ack(sub!);

  observe(p, 1, { observe: 1, key: 'good' });
  const gone = await p.next();
  t.equal(gone?.code, '2.05', 'deregistration answered as a plain GET');
  t.equal(observeValue(gone!), undefined, 'without Observe');
  store([message('urn:dev:a:temp', 23)]);
  t.equal(await p.next(300), null, 'nothing after deregistration');
});

t.test('a subtopic observation gets that subtopic only; a non-confirmable one gets non-confirmable notifications', async (t) => {
  const { port, store } = await observedServer(t);
  const p = peer(t, port);
  const opened = await register(t, p, 2, { subtopic: ['kitchen'], confirmable: false });
  t.equal(opened.confirmable, false);
  store([message('urn:dev:a:t', 1)]);
  store([message('urn:dev:a:t', 2)], CH, 'kitchen/oven');
  t.equal(await p.next(300), null, 'the channel itself and a deeper subtopic are not this one');
  store([message('urn:dev:a:t', 3)], CH, 'kitchen');
  const got = await p.next();
  t.equal(got?.confirmable, false);
  t.equal(got?.ack, false, 'a NON message, not an ACK acknowledging nothing');
  t.match(JSON.parse(got!.payload.toString()), [{ v: 3 }]);
});

t.test('refused registrations say why, without Observe', async (t) => {
  const { server, port } = await observedServer(t);
  const p = peer(t, port);
  const cases: [string, Parameters<typeof observe>[2], string, RegExp][] = [
    ['no key', {}, '4.01', /auth=/],
    ['unknown key', { key: 'nope' }, '4.01', /invalid device key/],
    ['no subscribe grant', { key: 'no-grant' }, '4.03', /forbidden/],
    ['unknown channel', { key: 'good', channel: WS }, '4.04', /channel not found/],
  ];
  let token = 10;
  for (const [what, opts, code, reason] of cases) {
    observe(p, token++, opts);
    const reply = await p.next();
    t.equal(reply?.code, code, what);
    t.match(reply?.payload.toString(), reason);
    t.equal(observeValue(reply!), undefined, `${what}: no Observe`);
    t.equal(option(reply!, 'Content-Format'), undefined, `${what}: a diagnostic, not a pack`);
  }
  p.send({ token: Buffer.of(2), code: '0.01', confirmable: true, options: [{ name: 'Observe', value: Buffer.alloc(0) }, ...pathOptions('m', WS, 'x', CH)] });
  const notChannel = await p.next();
  t.equal(notChannel?.code, '4.04', 'Observe on a path that is not a channel');
  t.equal(observeValue(notChannel!), undefined);
  t.equal(server.observations, 0, 'nothing held');
  p.send({ token: Buffer.of(1), code: '0.01', confirmable: true, options: pathOptions('m', WS, 'c', CH) });
  t.match(await p.next(), { code: '4.05' }, 'GET without Observe is not served');
});

t.test('a client that answers a notification with RST is no longer observing', async (t) => {
  const { server, port, store } = await observedServer(t);
  const p = peer(t, port);
  await register(t, p, 3);
  store([message('urn:dev:a:t', 1)]);
  const n = await p.next();
  p.reset(n!);
  await waitUntil(() => server.observations === 0, 2000, 'the RST ended the observation');
  store([message('urn:dev:a:t', 2)]);
  t.equal(await p.next(300), null);
});

t.test('a non-confirmable observation is checked with a confirmable notification now and then', async (t) => {
  const { server, port, store } = await observedServer(t);
  const p = peer(t, port);
  await register(t, p, 9, { confirmable: false });
  const types: boolean[] = [];
  let last;
  for (let i = 1; i <= CONFIRMABLE_EVERY; i++) {
    store([message('urn:dev:a:t', i)]);
    last = await p.next();
    types.push(last!.confirmable);
    t.equal(last!.ack, false, `notification ${i} is no ACK`);
  }
  t.same(types.map((c, i) => (c ? i + 1 : 0)).filter(Boolean), [CONFIRMABLE_EVERY], `notification ${CONFIRMABLE_EVERY} alone is confirmable`);
  p.reset(last!);
  await waitUntil(() => server.observations === 0, 2000, 'the RST it met ended the observation');
});

t.test('the same endpoint and token again re-registers instead of adding an observation', async (t) => {
  const { server, port, store } = await observedServer(t);
  const p = peer(t, port);
  await register(t, p, 4);
  await register(t, p, 4);
  t.equal(server.observations, 1);
  store([message('urn:dev:a:t', 1)]);
  t.ok(await p.next(), 'one notification');
  t.equal(await p.next(300), null, 'not two');
});

t.test('observations are bounded per device and overall', async (t) => {
  const { port } = await observedServer(t, { maxPerDevice: 2, maxObservations: 3 });
  const p = peer(t, port);
  await register(t, p, 1);
  await register(t, p, 2);
  observe(p, 3, { key: 'good' });
  const perDevice = await p.next();
  t.equal(perDevice?.code, '4.29', 'a third for the same device');
  t.match(perDevice?.payload.toString(), /too many observations for this device \(2\)/);
  t.same(option(perDevice!, 'Max-Age'), Buffer.of(60), 'Max-Age as the retry hint');
  await register(t, p, 4, { key: 'other' });
  observe(p, 5, { key: 'other' });
  const full = await p.next();
  t.equal(full?.code, '5.03', 'beyond the instance limit');
  t.match(full?.payload.toString(), /too many observations/);
});

t.test('a notification larger than a datagram is split; a record that cannot fit is skipped', async (t) => {
  const { port, store } = await observedServer(t);
  const p = peer(t, port);
  await register(t, p, 6, { confirmable: false });
  const many = Array.from({ length: 30 }, (_, i) => message(`urn:dev:plant:line-${i}:temperature`, i));
  store([...many, message('urn:dev:a:log', 0, { value: null, stringValue: 'x'.repeat(NOTIFICATION_BYTES) })]);
  const got: unknown[] = [];
  for (let n = await p.next(500); n; n = await p.next(300)) {
    t.ok(n.payload.length <= NOTIFICATION_BYTES, `notification of ${n.payload.length} bytes fits`);
    got.push(...JSON.parse(n.payload.toString()));
  }
  t.equal(got.length, 30, 'the thirty records, over several notifications; the oversized one skipped');
});

t.test('a revoked key or a withdrawn grant ends the observation with the reason', async (t) => {
  const { server, port, keys } = await observedServer(t, { revalidateSecs: 1 });
  const p = peer(t, port);
  await register(t, p, 7, { confirmable: false });
  keys.delete('good');
  const last = await p.next(3000);
  t.equal(last?.code, '4.01');
  t.equal(last?.payload.toString(), 'invalid device key');
  t.equal(last?.ack, false, 'a notification of its own, not an ACK');
  t.equal(observeValue(last!), undefined, 'a non-2.xx notification carries no Observe (RFC 7641 3.2)');
  t.equal(server.observations, 0);
});

t.test('shutdown ends observations with a non-confirmable 5.03', async (t) => {
  const { server, port } = await observedServer(t);
  const p = peer(t, port);
  await register(t, p, 8);
  const closed = server.close(1000);
  const last = await p.next();
  t.equal(last?.code, '5.03');
  t.equal(last?.confirmable, false);
  t.equal(last?.ack, false);
  t.same(option(last!, 'Max-Age'), Buffer.of(1));
  await closed;
});
