// Scenario: the ingest floor (bench/lib/ingest-floor-server.js) under ingest-http-1's load: one SenML
// record per request, stored by a group-commit INSERT, 202 after commit, with none of the service's
// checks. No target: it is the reference that shows how much of ingest-http-1's cost is the stack
// itself (uWS, postgres.js, PostgreSQL's commit) and how much the service adds on top. Teardown counts
// the stored rows against the acknowledged publishes like the ingest scenarios do.
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { ONE_RECORD, checkStored } from './ingest-http-1.js';

export default {
  name: 'ingest-floor',
  description: 'ingest-http-1 load against the stack alone (uWS, JSON.parse, group-commit INSERT via postgres.js, 202 after commit; no auth or checks)',
  server: 'ingest-floor',
  async setup(/** @type {any} */ ctx) {
    const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
    try {
      const [{ commits }] = await sql`select xact_commit::float8 as commits from pg_stat_database where datname = current_database()`;
      return { channelId: randomUUID(), commitsBefore: commits };
    } finally {
      await sql.end();
    }
  },
  request: (/** @type {any} */ ctx) => ({
    listener: 'messaging',
    method: 'POST',
    path: `/http/m/floor/c/${ctx.data.channelId}`,
    headers: { 'content-type': 'application/senml+json' },
    body: ONE_RECORD,
    expectedStatus: 202,
  }),
  async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
    return checkStored(ctx, result, 1, 'ingest-floor');
  },
};
