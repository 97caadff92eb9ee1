// Stopping the service under MQTT load: the listener stops accepting, PUBLISHes being stored are answered,
// clients are disconnected, the node deregisters, and every acknowledged message is in the database. MQTT 5
// clients are told the server is shutting down (DISCONNECT 0x8B) and no PUBLISH is refused as if forbidden.
import t from 'tap';
import postgres from 'postgres';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { BROKER_ENV, connect, deviceClient } from './helpers.js';

for (const protocolVersion of [4, 5] as const) t.test(`graceful stop under MQTT ${protocolVersion === 5 ? '5' : '3.1.1'} load`, async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const port = ts.service.ports.mqtt!;
  const ws = await insertTenant(ts, 'stopping');
  const ch = await insertChannel(ts, ws, 'line');
  const dev = await insertDevice(ts, ws, 'busy');
  await grant(ts, ws, dev.id, ch, ['publish']);
  const topic = `m/${ws}/c/${ch}`;
  const clients = await Promise.all(Array.from({ length: 8 }, () => deviceClient(t, port, dev, { protocolVersion })));
  let acked = 0;
  let refused = 0;
  const reasons = new Set<number>();
  for (const c of clients) c.on('disconnect', (packet) => reasons.add(packet.reasonCode ?? 0));
  let running = true;
  const closed = clients.map((c) => new Promise<void>((r) => c.once('close', () => r())));
  const loops = clients.map(async (c, i) => {
    for (let n = 0; running && c.connected; n++) {
      await new Promise<void>((resolve) => c.publish(topic, JSON.stringify([{ n: `m${i}-${n}`, v: n }]), { qos: 1 }, (err) => {
        if (!err) acked++;
        else if ((err as { code?: number }).code === 0x87) refused++;
        resolve();
      }));
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const nodeId = ts.service.registry.nodeId;
  await ts.service.stop();
  running = false;
  await Promise.all(closed);
  t.pass('every client was disconnected');
  await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 500))]);
  t.ok(acked > 0, `${acked} publishes acknowledged before the stop`);
  t.equal(refused, 0, 'no PUBLISH answered "not authorized" because the service was stopping');
  if (protocolVersion === 5) t.same([...reasons], [0x8b], 'told: server shutting down');
  await t.rejects(connect(t, port, { username: dev.id, password: dev.key, connectTimeout: 1000 }), 'no longer accepting');

  const sql = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => sql.end());
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from messages where channel_id = ${ch}`;
  t.ok(row!.n >= acked, `every acknowledged message stored (${row!.n} stored, ${acked} acknowledged)`);
  const nodes = await sql`select id from broker_nodes where id = ${nodeId}`;
  t.equal(nodes.length, 0, 'the node deregistered');
});
