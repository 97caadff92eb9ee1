// Group commit's batching against real PostgreSQL, on the writer alone: closed-loop publishers share
// one batch per round, a lone publisher never waits, and a writer connection does not wait for rows
// another connection is already writing; the per-channel counters move with the rows they count.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { createWriter, type WriterSettings } from '../../src/messaging/writer.js';
import type { StoredMessage } from '../../src/messaging/types.js';
import { migratedDatabase } from '../helpers/migrated.js';
import { testLogger } from '../helpers/service.js';
import { lockMessages } from './helpers.js';

const WORKSPACE = randomUUID();
const CHANNEL = randomUUID();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function message(name: string): StoredMessage {
  return {
    channel: CHANNEL, publisher: WORKSPACE, protocol: 'http', subtopic: null, name, unit: null, time: 1_800_000_000, value: 1,
    stringValue: null, boolValue: null, dataValue: null, sum: null, updateTime: null,
  };
}

async function writerOn(t: Test, settings: Partial<WriterSettings>) {
  const { url, sql } = await migratedDatabase(t);
  const writer = createWriter(url, {
    batchSize: 2000, batchWaitMs: 2, connections: 1, maxQueue: 10_000, writeTimeoutMs: 5000, connectTimeoutSecs: 5, ...settings,
  }, testLogger(), () => undefined);
  t.teardown(() => writer.close());
  return { writer, sql };
}

t.test('closed-loop publishers coming back at different moments share one batch per round', async (t) => {
  // A long wait bound, so only the fill rule decides when a batch goes: flushing at most of the
  // publishers would leave each round's stragglers a batch of their own.
  const { writer, sql } = await writerOn(t, { batchWaitMs: 200 });
  const publishers = 24;
  const rounds = 15;
  // A first round all at once, so the writer has seen its peak of 24 outstanding publishes.
  await Promise.all(Array.from({ length: publishers }, (_, p) => writer.write(WORKSPACE, [message(`p${p}`)], null)));
  const before = writer.stats();
  const publisher = async (p: number) => {
    for (let r = 0; r < rounds; r++) {
      await sleep((p * 7 + r * 3) % 5); // back after 0-4 ms, each at its own moment
      await writer.write(WORKSPACE, [message(`p${p}r${r}`)], null);
    }
  };
  await Promise.all(Array.from({ length: publishers }, (_, p) => publisher(p)));
  const after = writer.stats();
  const stored = after.stored - before.stored;
  const batches = after.batches - before.batches;
  t.equal(stored, publishers * rounds);
  t.equal(after.committed, publishers * (rounds + 1));
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from messages where channel_id = ${CHANNEL}`;
  t.equal(n, publishers * (rounds + 1), 'every acknowledged message is stored');
  t.ok(stored / batches >= publishers * 0.9, `${(stored / batches).toFixed(1)} rows per batch for ${publishers} publishers`);
});

t.test('a lone publisher does not wait for company', async (t) => {
  // A wait bound far above any commit's time: a writer that waited for company would take 50 s here.
  const { writer } = await writerOn(t, { batchWaitMs: 10_000 });
  const started = Date.now();
  for (let i = 0; i < 5; i++) await writer.write(WORKSPACE, [message(`alone${i}`)], null);
  const elapsed = Date.now() - started;
  t.ok(elapsed < 5000, `five publishes one after another took ${elapsed} ms (the wait bound is 10 s each)`);
  t.equal(writer.stats().batches, 5);
});

t.test('a free connection does not wait for rows another connection is writing', async (t) => {
  const { writer, sql } = await writerOn(t, { batchWaitMs: 10_000, connections: 2 });
  // Hold the table, so the first batch stays in flight on one connection.
  const release = await lockMessages(sql);
  const first = Array.from({ length: 8 }, (_, i) => writer.write(WORKSPACE, [message(`first${i}`)], null));
  await sleep(50);
  // The peak of outstanding messages is now 9, but 8 of them are being written: the ninth goes at once
  // on the free connection instead of waiting up to 10 s for eight more.
  const started = Date.now();
  const ninth = writer.write(WORKSPACE, [message('ninth')], null);
  await sleep(200);
  await release();
  await Promise.all([...first, ninth]);
  const elapsed = Date.now() - started;
  t.ok(elapsed < 5000, `the ninth publish committed after ${elapsed} ms (the wait bound is 10 s)`);
  t.equal(writer.stats().batches, 2);
});

t.test('counters: each channel gains its rows in the statement that stores them; a refused publish adds neither', async (t) => {
  const { writer, sql } = await writerOn(t, {});
  const other = randomUUID();
  // Written in one turn, the three publishes share one batch. The database refuses the third (its protocol
  // breaks the table's check), so the batch stores nothing and each publish is retried alone.
  const results = await Promise.allSettled([
    writer.write(WORKSPACE, [message('a'), message('b'), message('c')], 'three'),
    writer.write(WORKSPACE, [{ ...message('x'), channel: other }], 'one'),
    writer.write(WORKSPACE, [{ ...message('bad'), channel: other, protocol: 'pigeon' as never }], 'refused'),
  ]);
  t.same(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected']);
  t.equal(writer.stats().batches, 2, 'the two good publishes committed, each in a batch of its own after the refusal');
  const counted = await sql<{ channel_id: string; counted: number; stored: number }[]>`
    select c.channel_id, c.messages::int as counted, (select count(*)::int from messages m where m.channel_id = c.channel_id) as stored
    from message_counts c where c.channel_id in (${CHANNEL}, ${other}) order by c.messages desc`;
  t.same(counted, [{ channel_id: CHANNEL, counted: 3, stored: 3 }, { channel_id: other, counted: 1, stored: 1 }]);
});
