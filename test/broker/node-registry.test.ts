// Node registry on a real database: registration and heartbeats, exactly one leader among live nodes
// (advisory lock on each node's own connection), failover when the leader stops or its connection dies,
// stale rows shown unhealthy and pruned.
import t from 'tap';
import postgres from 'postgres';
import { createNodeRegistry, type NodeRegistry } from '../../src/broker/index.js';
import { createPool } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { migrationsDir } from '../../src/paths.js';
import { createTestDatabase } from '../helpers/database.js';
import { testLogger } from '../helpers/service.js';
import { waitUntil } from '../mqtt/helpers.js';

const DB = { poolMax: 4, connectTimeoutSecs: 5, idleTimeoutSecs: 0, maxLifetimeSecs: 0, embedded: { dataDir: '', port: 0 }, url: undefined };

t.test('node registry and leadership', async (t) => {
  const db = await createTestDatabase();
  const log = testLogger();
  const sql = createPool(db.url, DB, log);
  t.teardown(async () => {
    await sql.end({ timeout: 5 });
    await db.drop();
  });
  await migrate(sql, migrationsDir, log);

  const started: NodeRegistry[] = [];
  const node = async (address: string) => {
    const r = createNodeRegistry({ url: db.url, sql, log, heartbeatMs: 100, staleMs: 600, pruneMs: 2000 });
    await r.start(address);
    started.push(r);
    return r;
  };
  t.teardown(() => Promise.all(started.map((r) => r.stop().catch(() => undefined))));

  const a = await node('10.0.0.1:1883');
  const alone = await a.cluster();
  t.match(alone, { node_id: a.nodeId, cluster_mode: false, is_leader: true, nodes: [{ id: a.nodeId, address: '10.0.0.1:1883', healthy: true, leader: true }] });
  t.ok(a.isLeader());

  const b = await node('10.0.0.2:1883');
  const c = await node('10.0.0.3:1883');
  const view = await b.cluster();
  t.equal(view.nodes.length, 3);
  t.equal(view.cluster_mode, true, 'more than one healthy node');
  t.equal(view.nodes.filter((n) => n.leader).length, 1, 'exactly one leader');
  t.equal(view.is_leader, false);
  t.same([a, b, c].map((r) => r.isLeader()), [true, false, false]);
  t.ok(view.nodes.every((n) => n.uptime_seconds >= 0));

  const changes: boolean[] = [];
  b.onLeadershipChange((l) => changes.push(l));
  c.onLeadershipChange((l) => changes.push(l));
  await a.stop();
  await waitUntil(() => b.isLeader() || c.isLeader(), 3000, 'failover after the leader stopped');
  const after = await b.cluster();
  t.equal(after.nodes.length, 2, 'a stopped node deregisters');
  t.equal(after.nodes.filter((n) => n.leader).length, 1);
  t.same(changes, [true], 'one node took over');
  t.equal([b, c].filter((r) => r.isLeader()).length, 1);

  // A leader whose connection dies (crash, network) loses the lock with it; it notices at once, and
  // whichever node asks first afterwards (possibly itself, reconnected) becomes the one leader.
  const leader = b.isLeader() ? b : c;
  const follower = leader === b ? c : b;
  const lost: boolean[] = [];
  leader.onLeadershipChange((l) => lost.push(l));
  const admin = postgres(db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => admin.end());
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'svc-node'
    and pid = (select lock_pid from broker_nodes where id = ${leader.nodeId})`;
  await waitUntil(() => lost[0] === false, 3000, 'the leader noticed its connection died');
  await waitUntil(async () => {
    const v = await follower.cluster();
    const leaders = v.nodes.filter((n) => n.leader);
    return leaders.length === 1 && b.isLeader() === (leaders[0]!.id === b.nodeId) && c.isLeader() === (leaders[0]!.id === c.nodeId);
  }, 3000, 'one leader again, and both nodes agree with the view');
  t.pass('leadership re-established after the connection died');

  // A row left by an instance that died without deregistering: unhealthy, then pruned.
  await sql`insert into broker_nodes (id, address, started_at, heartbeat_at) values ('00000000-0000-4000-8000-0000000000aa', 'gone:1', now() - interval '1 hour', now() - interval '1 second')`;
  const stale = await follower.cluster();
  t.match(stale.nodes.find((n) => n.id === '00000000-0000-4000-8000-0000000000aa'), { healthy: false, leader: false });
  await waitUntil(async () => !(await follower.cluster()).nodes.some((n) => n.address === 'gone:1'), 5000, 'stale row pruned');
  t.pass('stale row pruned by the leader');
});
