// A database holding messages counted by the old trigger (schema up to 0050) upgrades in place: 0051
// rebuilds the reader's index ascending, 0052 drops the trigger, the counters keep their values, and
// from then on the writer's statement counts each row once (a trigger left behind would count twice).
import { randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { migrate } from '../../src/db/migrate.js';
import { migrationsDir } from '../../src/paths.js';
import { createWriter } from '../../src/messaging/writer.js';
import type { StoredMessage } from '../../src/messaging/types.js';
import { migratedDatabase } from '../helpers/migrated.js';
import { testLogger } from '../helpers/service.js';

/** The migrations up to and including `last`, in a directory of their own. */
async function migrationsUpTo(last: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mig-'));
  for (const f of await readdir(migrationsDir)) {
    if (f.endsWith('.sql') && f.slice(0, 4) <= last) await copyFile(path.join(migrationsDir, f), path.join(dir, f));
  }
  return dir;
}

t.test('messages counted by the old trigger keep their counts; new batches are counted once', async (t) => {
  const { url, sql } = await migratedDatabase(t, await migrationsUpTo('0050'));
  const [ws, channel, publisher] = [randomUUID(), randomUUID(), randomUUID()];
  // Before the upgrade, a plain INSERT is counted by the trigger.
  await sql`insert into messages (workspace_id, channel_id, publisher_id, protocol, name, time, value)
            select ${ws}, ${channel}, ${publisher}, 'http', 'old', 1800000000 + i, i from generate_series(1, 5) i`;
  const counted = async () => (await sql<{ n: number }[]>`select coalesce(sum(messages), 0)::int as n from message_counts where channel_id = ${channel}`)[0]!.n;
  t.equal(await counted(), 5, 'the old trigger counted the rows');

  const applied = await migrate(sql as never, migrationsDir, testLogger());
  t.ok(applied.includes('0051_index_messages_ascending') && applied.includes('0052_drop_message_counts_trigger'), applied.join(', '));
  t.equal(await counted(), 5, 'the counters are untouched by the upgrade');
  const [index] = await sql<{ def: string }[]>`select pg_get_indexdef('messages__channel_time'::regclass) as def`;
  t.match(index!.def, /\(channel_id, "time"\)$/, 'the reader index is ascending in time');
  const [{ triggers }] = await sql<[{ triggers: number }]>`select count(*)::int as triggers from pg_trigger where tgrelid = 'messages'::regclass and not tgisinternal`;
  t.equal(triggers, 0, 'no trigger on messages');

  const writer = createWriter(url, {
    batchSize: 100, batchWaitMs: 0, connections: 1, maxQueue: 100, writeTimeoutMs: 5000, connectTimeoutSecs: 5,
  }, testLogger(), () => undefined);
  t.teardown(() => writer.close());
  const message = (i: number): StoredMessage => ({
    channel, publisher, protocol: 'http', subtopic: null, name: 'new', unit: null, time: 1_800_000_100 + i, value: i,
    stringValue: null, boolValue: null, dataValue: null, sum: null, updateTime: null,
  });
  await writer.write(ws, [message(1), message(2), message(3)], null);
  t.equal(await counted(), 8, 'three new rows counted once');
  const newest = await sql<{ name: string; time: number }[]>`
    select name, time from messages where channel_id = ${channel} order by time desc limit 2`;
  t.same(newest, [{ name: 'new', time: 1_800_000_103 }, { name: 'new', time: 1_800_000_102 }], 'newest first through the ascending index');
});
