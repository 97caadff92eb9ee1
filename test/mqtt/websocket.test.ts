// MQTT over WebSocket at /mqtt on the messaging listener, with the mqtt client's ws transport: the same
// broker as TCP (keys, grants, tenant isolation, delivery across transports, storage with protocol mqtt,
// counters), and the WebSocket's own rules (subprotocol mqtt, binary frames only, 426 without upgrade).
import t from 'tap';
import { WebSocket } from 'undici';
import { startAuthService } from '../helpers/auth.js';
import { twoWorkspaces } from '../messaging/helpers.js';
import { BROKER_ENV, connect, deviceClient, inbox, publish, readMessages, sleep, subscribe, waitUntil } from './helpers.js';

const senml = (n: string, v: number) => JSON.stringify([{ bn: 'urn:dev:ws:', n, u: 'Cel', v }]);

t.test('MQTT over WebSocket', async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const wsUrl = `${ts.url('messaging').replace('http:', 'ws:')}/mqtt`;
  const mqttPort = ts.service.ports.mqtt!;
  const { ws, otherWs, channel: ch, otherChannel: otherCh, publisher: pubsub, subscriber: readOnly, foreign } = await twoWorkspaces(ts, 'mqtt-ws');
  const topic = `m/${ws}/c/${ch}`;

  await t.test('publish over WebSocket: stored with protocol mqtt, delivered to TCP and WebSocket subscribers', async (t) => {
    const tcpSub = await deviceClient(t, mqttPort, readOnly);
    const wsSub = await deviceClient(t, wsUrl, readOnly);
    t.same(await subscribe(tcpSub, topic, 1), [1]);
    t.same(await subscribe(wsSub, topic, 1), [1]);
    const [tcpBox, wsBox] = [inbox(tcpSub), inbox(wsSub)];
    const pub = await deviceClient(t, wsUrl, pubsub, { protocolVersion: 5 });
    await publish(pub, topic, senml('over-ws', 7), { qos: 1 });
    t.same(JSON.parse((await tcpBox.waitFor(1))[0]!.payload), JSON.parse(senml('over-ws', 7)));
    t.match((await wsBox.waitFor(1))[0], { topic, qos: 1 });
    const read = await readMessages(ts, ws, ch, readOnly.key);
    t.match(read.messages.find((m) => m.name === 'urn:dev:ws:over-ws'), { protocol: 'mqtt', value: 7, publisher: pubsub.id });
  });

  await t.test('the broker\'s refusals hold over WebSocket', async (t) => {
    await t.rejects(connect(t, wsUrl, { username: pubsub.id, password: `${pubsub.key}x` }), { code: 4 }, 'a wrong key');
    const before = (await readMessages(ts, ws, ch, readOnly.key)).total;
    const ro = await deviceClient(t, wsUrl, readOnly);
    await publish(ro, topic, senml('not-allowed', 1), { qos: 1 });
    const intruder = await deviceClient(t, wsUrl, foreign);
    t.same(await subscribe(intruder, [topic, `m/${otherWs}/c/${otherCh}`], 1), [128, 1], "another workspace's channel refused, its own granted");
    await publish(intruder, topic, senml('intruder', 2), { qos: 1 });
    await sleep(150);
    t.equal((await readMessages(ts, ws, ch, readOnly.key)).total, before, 'nothing stored from a device without publish or of another workspace');
  });

  await t.test('counted with the broker\'s MQTT connections and bytes', async (t) => {
    const stats = async () => (await (await fetch(`${ts.url('broker_admin')}/api/v1/stats`)).json()) as {
      by_protocol: { mqtt: { connections: { current: number; total: number }; bytes: { received: number } } };
    };
    const before = (await stats()).by_protocol.mqtt;
    await deviceClient(t, wsUrl, pubsub);
    const after = (await stats()).by_protocol.mqtt;
    // Total rather than current: the earlier subtests' clients may still be closing on the server side.
    t.equal(after.connections.total, before.connections.total + 1, 'the connection counted');
    t.ok(after.connections.current >= 1);
    t.ok(after.bytes.received > before.bytes.received, 'the CONNECT counted in bytes received');
  });

  await t.test('WebSocket rules: subprotocol mqtt, binary frames, 426 without the upgrade', async (t) => {
    const plain = await fetch(wsUrl.replace('ws:', 'http:'));
    t.equal(plain.status, 426);
    t.equal(plain.headers.get('upgrade'), 'websocket');
    const noProtocol = new WebSocket(wsUrl);
    const refused = await new Promise<string>((resolve) => {
      noProtocol.addEventListener('open', () => resolve('open'));
      noProtocol.addEventListener('error', () => resolve('refused'));
    });
    t.equal(refused, 'refused', 'no mqtt subprotocol: the upgrade is refused');
    const text = new WebSocket(wsUrl, 'mqtt');
    t.teardown(() => text.close());
    let closed: { code: number; reason: string } | undefined;
    text.addEventListener('close', (e) => {
      closed = { code: e.code, reason: e.reason };
    });
    await new Promise<void>((resolve) => text.addEventListener('open', () => resolve()));
    t.equal(text.protocol, 'mqtt');
    text.send('CONNECT');
    await waitUntil(() => closed !== undefined, 3000, 'closed');
    t.same(closed, { code: 1003, reason: 'MQTT travels in binary frames' });
  });
});
