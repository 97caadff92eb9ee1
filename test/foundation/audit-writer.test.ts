import postgres from 'postgres';
import t from 'tap';
import { createAuditWriter } from '../../src/audit/writer.js';
import { createTestDatabase } from '../helpers/database.js';
import { migratedDatabase } from '../helpers/migrated.js';
import { testLogger } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

t.test('events are written in batches with their fields', async (t) => {
  const { sql } = await migratedDatabase(t);
  const audit = createAuditWriter(sql as never, { batchSize: 100, flushIntervalMs: 50, maxQueue: 1000 }, testLogger());
  const tenant = '6a1e3b52-47b1-4ad6-9a8e-6a3cf1b0c001';
  for (let i = 0; i < 250; i++) {
    audit.record({ event: 'test.event', outcome: i % 2 ? 'allow' : 'deny', actorEntityId: null, tenantId: i < 10 ? tenant : null, details: { i } });
  }
  await audit.flush();
  const [{ count }] = await sql<[{ count: number }]>`select count(*)::int as count from audit_log where event = 'test.event'`;
  t.equal(count, 250);
  const [{ tenants }] = await sql<[{ tenants: number }]>`select count(*)::int as tenants from audit_log where tenant_id = ${tenant}`;
  t.equal(tenants, 10);
  const [row] = await sql`select outcome, details from audit_log where details->>'i' = '3'`;
  t.same(row, { outcome: 'allow', details: { i: 3 } });
  t.equal(audit.stats.written, 250);
});

t.test('a failing audit write never throws into or delays the caller', async (t) => {
  const db = await createTestDatabase({ empty: true });
  const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end();
    await db.drop();
  });
  // No migrations: the table does not exist, so every write fails.
  const audit = createAuditWriter(sql as never, { batchSize: 10, flushIntervalMs: 10, maxQueue: 25 }, testLogger());
  // record() hands back nothing to await and returns before any write is tried: the caller's path never
  // includes the database, failing or not.
  const returned = Array.from({ length: 100 }, () => audit.record({ event: 'doomed', outcome: 'error' }));
  t.ok(returned.every((r) => r === undefined), 'nothing to await');
  t.equal(audit.stats.failures, 0, 'no write was tried while the caller recorded');
  // The first write needs a connection: on a loaded machine that alone can take longer than a fixed pause.
  await waitUntil(() => audit.stats.failures > 0, 10_000, 'a failed audit write');
  t.pass('failures were seen');
  t.ok(audit.stats.dropped >= 75, 'what exceeds the bounded queue is dropped and counted');
  await audit.close();
});

t.test('an event the database could not store never blocks the ones behind it', async (t) => {
  const { sql } = await migratedDatabase(t);
  const audit = createAuditWriter(sql as never, { batchSize: 50, flushIntervalMs: 20, maxQueue: 1000 }, testLogger());
  // A client's input quoted into an event: NUL and a lone surrogate, which PostgreSQL's jsonb and text refuse.
  audit.record({ event: 'test.quoted', outcome: 'deny', targetId: 'id\u0000x', details: { identifier: 'a\u0000b', name: 'x\ud800y', ['k\u0000']: ['\udfff'] } });
  // An event no replacement can save (an actor id that is no UUID: a bug upstream): dropped alone.
  audit.record({ event: 'test.poison', outcome: 'error', actorEntityId: 'not-a-uuid' });
  for (let i = 0; i < 20; i++) audit.record({ event: 'test.after', outcome: 'allow', details: { i } });
  await audit.flush();
  const [quoted] = await sql`select target_id, details from audit_log where event = 'test.quoted'`;
  t.same(quoted, { target_id: 'id\uFFFDx', details: { identifier: 'a\uFFFDb', name: 'x\uFFFDy', 'k\uFFFD': ['\uFFFD'] } }, 'kept, with U+FFFD in place of what cannot be stored');
  const [{ after }] = await sql<[{ after: number }]>`select count(*)::int as after from audit_log where event = 'test.after'`;
  t.equal(after, 20, 'every event behind the refused one was written');
  const [{ poison }] = await sql<[{ poison: number }]>`select count(*)::int as poison from audit_log where event = 'test.poison'`;
  t.equal(poison, 0);
  t.equal(audit.stats.dropped, 1, 'the refused event is dropped and counted');
  t.equal(audit.stats.written, 21);
  t.equal(audit.stats.queued, 0, 'nothing is left waiting for a retry that would fail again');
  await audit.close();
});
