// Broker admin API over HTTP: every field SPEC.md lists with the exact names, counters that move after
// connections and publishes (MQTT, HTTP and CoAP), 405/404/503 answers, and the optional bearer token.
import t from 'tap';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { BROKER_ENV, coapPost, deviceClient, publish, subscribe } from '../mqtt/helpers.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';

const zeros = (o: unknown): boolean => (typeof o === 'number' ? o === 0 : Object.values(o as object).every(zeros));
const keysDeep = (o: unknown): unknown => (o && typeof o === 'object' && !Array.isArray(o)
  ? Object.fromEntries(Object.entries(o).map(([k, v]) => [k, keysDeep(v)]))
  : typeof o);

const STATS_SHAPE = {
  uptime_seconds: 'number',
  connections: { current: 'number', total: 'number', disconnections: 'number' },
  messages: { received: 'number', sent: 'number' },
  bytes: { received: 'number', sent: 'number' },
  errors: { protocol: 'number' },
  by_protocol: {
    mqtt: {
      connections: { current: 'number', total: 'number', disconnections: 'number' },
      messages: { received: 'number', sent: 'number', publish_received: 'number', publish_sent: 'number' },
      bytes: { received: 'number', sent: 'number' },
      subscriptions: { active: 'number', retained_messages: 'number' },
      errors: { protocol: 'number', auth: 'number', authz: 'number', packet: 'number' },
    },
    amqp: {
      connections: { current: 'number', total: 'number', disconnections: 'number' },
      messages: { received: 'number', sent: 'number' },
      bytes: { received: 'number', sent: 'number' },
      channels: 'number',
      consumers: 'number',
      errors: { protocol: 'number' },
      local_principals: {
        active_connections: 'number', publish_timeouts: 'number', publish_rejections: 'number',
        authentication: { success: 'number', failure: 'number' },
        authorization: { publish_denied: 'number', subscribe_denied: 'number', operation_denied: 'number' },
        reloads: { success: 'number', failure: 'number', forced_disconnects: 'number' },
      },
    },
  },
  queues: {
    capture_failures: 'number',
    capture_dropped: 'number',
    claims: { attempts: 'number', successes: 'number', failures: 'number' },
    steals: { attempts: 'number', successes: 'number', failures: 'number' },
    acknowledgments: { ack: 'number', nack: 'number', reject: 'number', dlq: 'number' },
    pending: { current: 'number', high_water: 'number' },
  },
};

async function get(base: string, path: string, init: RequestInit = {}) {
  const res = await fetch(`${base}${path}`, init);
  return { status: res.status, body: await res.json() as any, headers: res.headers };
}

t.test('broker admin API', async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const admin = ts.url('broker_admin');
  const ws = await insertTenant(ts, 'admin-stats');
  const ch = await insertChannel(ts, ws, 'line');
  const dev = await insertDevice(ts, ws, 'meter');
  await grant(ts, ws, dev.id, ch, ['publish', 'subscribe']);
  const topic = `m/${ws}/c/${ch}`;

  const first = await get(admin, '/api/v1/stats');
  t.equal(first.status, 200);
  t.same(keysDeep(first.body), STATS_SHAPE, 'every SPEC field, exact names, numbers');
  t.ok(zeros(first.body.by_protocol.amqp), 'AMQP: not served, all zero');

  const sub = await deviceClient(t, ts.service.ports.mqtt!, dev);
  await subscribe(sub, topic, 1);
  const pub = await deviceClient(t, ts.service.ports.mqtt!, dev);
  await publish(pub, topic, JSON.stringify([{ n: 'a', v: 1 }]), { qos: 1 });
  await publish(pub, topic, JSON.stringify([{ n: 'b', v: 2 }]), { qos: 0 });
  await publish(pub, 'not/a/channel', '[]', { qos: 1 });
  const res = await fetch(`${ts.url('messaging')}/http/m/${ws}/c/${ch}`, {
    method: 'POST', headers: { authorization: `Client ${dev.key}`, 'content-type': 'application/senml+json' }, body: JSON.stringify([{ n: 'c', v: 3 }]),
  });
  t.equal(res.status, 202);
  t.match(await coapPost(ts.service.ports.coap!, `/${topic}?auth=${dev.key}`, JSON.stringify([{ n: 'd', v: 4 }])), { code: '2.04' });
  await fetch(`${ts.url('messaging')}/http/m/${ws}/c/${ch}`, {
    method: 'POST', headers: { authorization: 'Client wrong-key-wrong-key', 'content-type': 'application/senml+json' }, body: '[]',
  });

  const s = (await get(admin, '/api/v1/stats')).body;
  const m = s.by_protocol.mqtt;
  t.same(m.connections, { current: 2, total: 2, disconnections: 0 });
  t.same(s.connections, m.connections, 'totals: MQTT plus AMQP (zero)');
  t.equal(m.messages.publish_received, 3);
  t.ok(m.messages.publish_sent >= 3, 'the MQTT publishes plus the HTTP and CoAP ones, delivered to the subscriber');
  t.ok(m.messages.received >= 3 + 2 + 1, 'PUBLISH + CONNECT + SUBSCRIBE at least');
  t.ok(m.messages.sent >= m.messages.publish_sent + 2 + 1 + 1, 'PUBLISH + CONNACK + SUBACK + PUBACK at least');
  t.ok(m.bytes.received > 0 && m.bytes.sent > 0);
  t.same(s.bytes, m.bytes);
  t.same(m.subscriptions, { active: 1, retained_messages: 0 });
  t.equal(m.errors.authz, 1, 'publish outside m/<ws>/c/<ch>');
  t.ok(s.queues.acknowledgments.ack >= 4, 'MQTT QoS 1 and 0, HTTP and CoAP publishes acknowledged after commit');
  t.ok(s.queues.acknowledgments.reject >= 1, 'the HTTP publish with a wrong key');
  t.ok(s.queues.pending.high_water >= 1);
  t.equal(s.queues.pending.current, 0);
  t.ok(s.uptime_seconds > 0);

  await new Promise<void>((r) => pub.end(false, {}, () => r()));
  const s2 = (await get(admin, '/api/v1/stats')).body;
  t.same(s2.by_protocol.mqtt.connections, { current: 1, total: 2, disconnections: 1 });

  const cluster = (await get(admin, '/api/v1/cluster')).body;
  t.same(keysDeep(cluster), { node_id: 'string', cluster_mode: 'boolean', is_leader: 'boolean', nodes: 'object' });
  t.match(cluster, { cluster_mode: false, is_leader: true, nodes: [{ id: cluster.node_id, healthy: true, leader: true, address: String, uptime_seconds: Number }] });

  const overview = (await get(admin, '/api/v1/overview')).body;
  t.same(Object.keys(overview).sort(), ['cluster', 'cluster_mode', 'is_leader', 'node_id', 'sessions', 'stats', 'uptime_seconds']);
  t.same(overview.sessions, { connected: 1, total: 1 });
  t.same(keysDeep(overview.stats), STATS_SHAPE);
  t.same(overview.cluster.nodes.map((n: { id: string }) => n.id), [cluster.node_id]);
  t.equal(overview.node_id, cluster.node_id);

  for (const path of ['/api/v1/stats', '/api/v1/cluster', '/api/v1/overview']) {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const r = await get(admin, path, { method });
      t.equal(r.status, 405, `${method} ${path}`);
      t.same(r.body, { error: `method not allowed: ${method}; allowed: GET` });
      t.equal(r.headers.get('allow'), 'GET');
    }
  }
  const missing = await get(admin, '/api/v1/nodes');
  t.equal(missing.status, 404);
  t.type(missing.body.error, 'string');
});

t.test('broker admin: 503 without a broker; optional bearer token', async (t) => {
  const noMqtt = await startAuthService(t, { SVC_BROKER_ADMIN_TOKEN: 'admin-token-0123456789' });
  const base = noMqtt.url('broker_admin');
  const auth = { headers: { authorization: 'Bearer admin-token-0123456789' } };
  t.equal((await get(base, '/api/v1/stats')).status, 401, 'token required when configured');
  t.equal((await get(base, '/api/v1/stats', { headers: { authorization: 'Bearer wrong' } })).status, 401);
  for (const path of ['/api/v1/stats', '/api/v1/cluster', '/api/v1/overview']) {
    const r = await get(base, path, auth);
    t.equal(r.status, 503, `${path} with MQTT off`);
    t.same(r.body, { error: 'broker not available' });
  }
});
