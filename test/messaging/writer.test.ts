// Group commit under failure: connections killed mid-load, a database refusing connections, a full queue.
import t from 'tap';
import postgres from 'postgres';
import { adminUrl } from '../helpers/database.js';
import { AUTH_ENV } from '../helpers/auth.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { countRows, lockMessages, publish, world } from './helpers.js';

t.test('writer connections terminated mid-load: 202 or 503 only, and every acknowledged message is stored', async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_WRITE_TIMEOUT_MS: '1000' });
  const w = await world(ts, 'ws-kill');
  const sql = ts.service.sql;
  let stop = false;
  let seq = 0;
  const acked: string[] = [];
  const statuses = new Map<number, number>();
  let retryAfterOn503 = true;
  const worker = async () => {
    while (!stop) {
      const name = `m${seq++}`;
      const res = await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: name, v: 1 }]);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status === 202) acked.push(name);
      if (res.status === 503 && res.headers.get('retry-after') !== '1') retryAfterOn503 = false;
      await res.arrayBuffer();
    }
  };
  const killer = async () => {
    for (let i = 0; i < 15; i++) {
      await new Promise((r) => setTimeout(r, 60));
      await sql`select pg_terminate_backend(pid) from pg_stat_activity
                where application_name = 'svc-writer' and datname = current_database() and pid <> pg_backend_pid()`;
    }
  };
  const workers = Array.from({ length: 16 }, worker);
  // The storm starts once publishes are being acknowledged and ends with the load still running until
  // one is acknowledged again: fixed sleeps left the outcome to how fast the database accepts a
  // connection (the embedded one, with password authentication, once recovered too late for any 202).
  let ackedBeforeStorm = 0;
  let ackedByStormEnd = 0;
  try {
    await waitUntil(() => acked.length > 0, 10_000, 'a publish acknowledged before the storm');
    ackedBeforeStorm = acked.length;
    await killer();
    ackedByStormEnd = acked.length;
    // Not thrown on: the assertion below reports a writer that never recovered under load.
    await waitUntil(() => acked.length > ackedByStormEnd, 10_000).catch(() => undefined);
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  t.same([...statuses.keys()].filter((s) => s !== 202 && s !== 503), [], `only 202 and 503: ${JSON.stringify([...statuses])}`);
  t.ok(retryAfterOn503, '503 answers carry Retry-After');
  t.ok(acked.length > ackedByStormEnd, `${acked.length} acknowledged (${ackedBeforeStorm} before the storm, ${ackedByStormEnd} by its end)`);
  const rows = await sql<{ name: string }[]>`select name from messages where channel_id = ${w.channel}`;
  const stored = new Set(rows.map((r) => r.name));
  const missing = acked.filter((n) => !stored.has(n));
  t.same(missing, [], `acknowledged ${acked.length}, stored ${stored.size}, 503 ${statuses.get(503) ?? 0}`);
  t.comment(`statuses ${JSON.stringify([...statuses])}; stats ${JSON.stringify(ts.service.messaging.stats())}`);
  // Recovered: a publish after the storm is stored (the writer probes the database back within a second).
  let status = 0;
  for (let i = 0; i < 30 && status !== 202; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 100));
    status = (await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: 'after', v: 1 }])).status;
  }
  t.equal(status, 202);
});

t.test('a database refusing connections: publishes answer 503 at once, then recover', async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  const w = await world(ts, 'ws-down');
  const sql = ts.service.sql;
  t.equal((await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: 'before', v: 1 }])).status, 202);
  // ALTER DATABASE cannot target the database it runs in: the server's maintenance database does it.
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
  t.teardown(() => admin.end());
  await admin.unsafe(`alter database ${ts.db.name} with allow_connections false`);
  try {
    // From the admin connection, which is open already: the service's pool may need a new connection
    // for this, and the database now refuses those.
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'svc-writer' and datname = ${ts.db.name}`;
    const statuses: number[] = [];
    const started = Date.now();
    for (let i = 0; i < 5; i++) {
      const res = await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: `down${i}`, v: 1 }]);
      statuses.push(res.status);
      if (res.status === 503) t.equal(res.headers.get('retry-after'), '1');
      await res.arrayBuffer();
    }
    t.same(statuses, [503, 503, 503, 503, 503], 'refused while the database is away');
    t.ok(Date.now() - started < 3000, `answered fast (${Date.now() - started} ms for 5)`);
  } finally {
    await admin.unsafe(`alter database ${ts.db.name} with allow_connections true`);
  }
  let status = 0;
  for (let i = 0; i < 100 && status !== 202; i++) {
    await new Promise((r) => setTimeout(r, 100));
    status = (await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: 'back', v: 1 }])).status;
  }
  t.equal(status, 202, 'publishes are stored again once the database is back');
  const names = (await sql<{ name: string }[]>`select name from messages where channel_id = ${w.channel} order by name`).map((r) => r.name);
  t.same(names.filter((n) => n.startsWith('down')), [], 'nothing refused was stored');
  t.ok(names.includes('before') && names.includes('back'));
});

t.test('a full queue answers 503 with Retry-After and stores only what it accepted', async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_MAX_QUEUE: '5' });
  const w = await world(ts, 'ws-queue');
  // A slow database: the table is locked, so the first batch waits and later publishes pile up behind it.
  const release = await lockMessages(ts.service.sql);
  const pending = Array.from({ length: 12 }, (_, i) => publish(ts, w.ws, w.channel, w.publisher.key, [{ n: `q${i}`, v: i }]));
  await new Promise((r) => setTimeout(r, 500));
  await release();
  const results = await Promise.all(pending);
  const statuses = results.map((r) => r.status);
  t.equal(statuses.filter((s) => s === 202).length, 5, `five accepted: ${statuses}`);
  t.equal(statuses.filter((s) => s === 503).length, 7, 'the rest refused');
  for (const r of results) {
    if (r.status === 503) {
      t.equal(r.headers.get('retry-after'), '1');
      t.equal(((await r.json()) as { error: string }).error, 'ingest queue is full');
    }
  }
  t.equal(await countRows(ts, w.channel), 5);
  const stats = ts.service.messaging.stats();
  t.match(stats, { highWater: 5, stored: 5, acknowledged: 5, queued: 0 });
});

t.test('shutdown with publishes in flight: the listeners drain, the writer commits, every 202 is stored', async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  const w = await world(ts, 'ws-stop');
  // Read with a connection of our own: the service's pool closes with it.
  const check = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => check.end());
  // Hold the writer on a locked table so the publishes are still in flight when the stop begins.
  const release = await lockMessages(check);
  const acked: string[] = [];
  const sent = Array.from({ length: 40 }, async (_, i) => {
    const res = await publish(ts, w.ws, w.channel, w.publisher.key, [{ n: `s${i}`, v: i }]);
    if (res.status === 202) acked.push(`s${i}`);
    await res.arrayBuffer();
  });
  while (ts.service.messaging.stats().queued < 40) await new Promise((r) => setTimeout(r, 10));
  const stopped = ts.service.stop();
  await new Promise((r) => setTimeout(r, 200));
  await release();
  await stopped;
  await Promise.all(sent);
  t.equal(acked.length, 40, 'the publishes in flight were answered 202 during the drain');
  const rows = await check<{ name: string }[]>`select name from messages where channel_id = ${w.channel}`;
  const stored = new Set(rows.map((r) => r.name));
  t.same(acked.filter((n) => !stored.has(n)), [], 'every acknowledged publish is stored');
});
