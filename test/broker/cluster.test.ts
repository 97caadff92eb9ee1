// Two service instances on one database: both registered, exactly one leader, cluster_mode on; the
// leader stops and the other instance takes over, alone again (cluster_mode off).
import t from 'tap';
import { AUTH_ENV } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';
import { BROKER_ENV, waitUntil } from '../mqtt/helpers.js';

async function cluster(base: string) {
  const res = await fetch(`${base}/api/v1/cluster`);
  if (res.status !== 200) throw new Error(`cluster answered ${res.status}`);
  return res.json() as Promise<{ node_id: string; cluster_mode: boolean; is_leader: boolean; nodes: { id: string; healthy: boolean; leader: boolean }[] }>;
}

t.test('two instances: two nodes, one leader, failover', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  // Teardown runs last-registered first: B, then A, then the database.
  const a = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
  const b = await startTestService(t, { ...AUTH_ENV, ...BROKER_ENV }, db);
  const [ca, cb] = await Promise.all([cluster(a.url('broker_admin')), cluster(b.url('broker_admin'))]);
  t.not(ca.node_id, cb.node_id);
  for (const view of [ca, cb]) {
    t.equal(view.nodes.length, 2, 'two nodes');
    t.equal(view.nodes.filter((n) => n.leader).length, 1, 'exactly one leader');
    t.ok(view.nodes.every((n) => n.healthy));
    t.equal(view.cluster_mode, true);
  }
  t.equal(Number(ca.is_leader) + Number(cb.is_leader), 1, 'each instance knows whether it leads');
  t.equal(a.service.registry.isLeader(), ca.is_leader, 'the flag other domains read agrees');

  const [leader, follower] = ca.is_leader ? [a, b] : [b, a];
  await leader.service.stop();
  await waitUntil(async () => (await cluster(follower.url('broker_admin'))).is_leader, 5000, 'failover');
  const after = await cluster(follower.url('broker_admin'));
  t.equal(after.nodes.length, 1, 'the stopped instance deregistered');
  t.equal(after.cluster_mode, false);
  t.ok(follower.service.registry.isLeader());
});
