// Issue 35.2: PostgreSQL restarted for real under publish load. A cluster of the test's own (the embedded
// PostgreSQL the service starts when DATABASE_URL is unset, src/db/embedded.ts, in a temporary directory,
// on a free port) runs the service's database; it is stopped and started again while HTTP publishes
// continue. Acknowledged (202) = stored; while it is down publishes answer 503 and /health says so; after
// it is back the service stores and reports ok again by itself, without a restart. The shared PostgreSQL
// of the other tests is not touched.
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../../src/db/embedded.js';
import { AUTH_ENV } from '../../helpers/auth.js';
import { startTestService, testLogger } from '../../helpers/service.js';
import { sleep, waitUntil } from '../../helpers/wait.js';
import { publish, world } from '../../messaging/helpers.js';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

t.test('PostgreSQL stopped and started under publish load: acked = stored, 503 and /health while down, recovery by itself', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-faults-pg-'));
  const port = await freePort();
  let cluster: EmbeddedDatabase | undefined = await startEmbeddedPostgres(dir, port, testLogger());
  // Last: after the service stopped (teardowns run in reverse order).
  t.teardown(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });
  const url = cluster.url;
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_WRITE_TIMEOUT_MS: '1000' }, { url, name: 'svc', drop: async () => undefined });
  const w = await world(ts, 'faults-restart');
  const health = async () => {
    const res = await fetch(`${ts.url()}/health`);
    return { status: res.status, body: (await res.json()) as { status: string; database?: { status: string } } };
  };
  t.match(await health(), { status: 200, body: { status: 'ok' } }, '/health ok before');

  let stop = false;
  let seq = 0;
  const acked: string[] = [];
  const statuses = new Map<string, number>();
  const worker = async () => {
    while (!stop) {
      const name = `r${seq++}`;
      const res = await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: name, v: 1 }]);
      const body = await res.text();
      const key = `${res.status}${res.status === 202 ? '' : ` ${body.slice(0, 60)}`}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      if (res.status === 202) acked.push(name);
      else await sleep(20);
    }
  };
  const workers = Array.from({ length: 6 }, worker);
  let downHealth: { status: number; body: unknown } | undefined;
  let ackedWhenStopped = 0;
  let ackedWhenStarted = 0;
  let downMs = 0;
  try {
    await waitUntil(() => acked.length > 20, 15_000, 'publishes acknowledged before the restart');
    ackedWhenStopped = acked.length;
    const stoppedAt = Date.now();
    await cluster.stop();
    cluster = undefined;
    // Down: publishes are refused, and /health tells.
    const refusedFrom = [...statuses.entries()].filter(([k]) => k.startsWith('503')).reduce((n, [, v]) => n + v, 0);
    await waitUntil(() => [...statuses.entries()].filter(([k]) => k.startsWith('503')).reduce((n, [, v]) => n + v, 0) > refusedFrom + 5,
      15_000, 'publishes refused while PostgreSQL is down');
    downHealth = await health();
    cluster = await startEmbeddedPostgres(dir, port, testLogger());
    downMs = Date.now() - stoppedAt;
    ackedWhenStarted = acked.length;
    await waitUntil(() => acked.length > ackedWhenStarted + 20, 30_000, 'publishes acknowledged again after the restart');
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  t.comment(`down ${downMs} ms; acknowledged ${acked.length} (${ackedWhenStopped} before the stop, ${ackedWhenStarted} when it was back); answers ${JSON.stringify([...statuses])}`);
  t.same([...statuses.keys()].filter((k) => k !== '202' && !k.startsWith('503')), [], 'only 202 and 503 answers');
  t.ok(acked.length > ackedWhenStarted, 'acknowledged again after the restart, by the same service process');
  t.match(downHealth, { status: 503, body: { status: 'error', database: { status: 'error' } } }, '/health says the database is down while it is');
  await waitUntil(async () => (await health()).body.status === 'ok', 15_000, '/health ok again').catch(() => undefined);
  t.match(await health(), { status: 200, body: { status: 'ok' } }, '/health ok again after the restart');

  const check = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => check.end());
  const stored = new Set((await check<{ name: string }[]>`select name from messages where channel_id = ${w.channel}`).map((r) => r.name));
  t.same(acked.filter((n) => !stored.has(n)), [], `${acked.length} acknowledged, every one stored (${stored.size} stored)`);
});
