// Scenario: the message reader's first page (default limit, newest first, exact total) on a channel
// holding 1,000,000 messages, read by a device with subscribe (Client key). Setup loads the rows with one
// INSERT ... SELECT through the partitioned table, adding to the per-channel counter as the writer does,
// plus 200,000 rows of another channel in the same partitions, then VACUUM ANALYZE and a CHECKPOINT. p99 is the figure.
import postgres from 'postgres';
import { INGEST_BENCH_ENV, setupChannel } from './ingest-http-1.js';

const ROWS = 1_000_000;
const OTHER_ROWS = 200_000;

export default {
  name: 'reader-first-page',
  description: `GET /{ws}/channels/{ch}/messages (first page, default limit, total) on a channel of ${ROWS.toLocaleString('en')} messages`,
  env: INGEST_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    const data = await setupChannel(ctx, 'reader-first-page');
    const other = await setupChannel(ctx, 'reader-first-page-other');
    const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
    try {
      // The channel's counter in the same statement, as the service's writer keeps it.
      const load = (/** @type {any} */ d, /** @type {number} */ rows) => sql`
        with stored as (
          insert into messages (workspace_id, channel_id, publisher_id, protocol, name, unit, time, value)
          select ${d.workspaceId}::uuid, ${d.channelId}::uuid, ${d.deviceId}::uuid, 'http', 'urn:dev:bench:t' || (i % 100), 'Cel',
                 1700000000 + i * 0.5, i % 1000
          from generate_series(1, ${rows}::int) i)
        insert into message_counts (channel_id, day, messages) values (${d.channelId}::uuid, (now() at time zone 'UTC')::date, ${rows})`;
      await load(data, ROWS);
      await load(other, OTHER_ROWS);
      await sql`vacuum analyze messages`;
      // Write the loaded pages out now, so the checkpointer's work is not billed to the reads.
      await sql`checkpoint`;
    } finally {
      await sql.end();
    }
    return data;
  },
  request: (/** @type {any} */ ctx) => ({
    listener: 'reader',
    method: 'GET',
    path: `/${ctx.data.workspaceId}/channels/${ctx.data.channelId}/messages`,
    headers: { authorization: `Client ${ctx.data.key}` },
    expectedStatus: 200,
  }),
};
