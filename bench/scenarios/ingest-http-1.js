// Scenario: HTTP publish of one SenML record per request (POST /http/m/{ws}/c/{ch}, Client key, 202 after the
// group commit). CPU = service + every PostgreSQL process, per acknowledged message. Teardown counts the
// channel's stored rows against every 202 the generator received (warm-up included); a missing message is
// an error. Also exports the setup the other ingest-* and reader-* scenarios share.
import postgres from 'postgres';
import { AUTH_BENCH_ENV, adminSession, graphql } from './auth-whoami-anon.js';

export const INGEST_BENCH_ENV = AUTH_BENCH_ENV;
export const ONE_RECORD = JSON.stringify([{ bn: 'urn:dev:bench:', n: 'temp', u: 'Cel', v: 21.5 }]);

/**
 * A fresh workspace, channel and device with publish and subscribe on it, its shared key from the API.
 * @param {any} ctx
 * @param {string} label
 */
export async function setupChannel(ctx, label) {
  const admin = await adminSession(ctx.ports.http);
  const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const stamp = `${label}-${Date.now()}`;
    const [tenant] = await sql`insert into tenants (name, alias, status) values (${`bench ${stamp}`}, ${`bench-${stamp}`}, 'active') returning id`;
    const [channel] = await sql`insert into resources (kind, name, tenant_id) values ('channel', 'bench channel', ${tenant.id}) returning id`;
    const [device] = await sql`insert into entities (kind, name, tenant_id, status) values ('device', 'bench device', ${tenant.id}, 'active') returning id`;
    const [block] = await sql`insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id, effect)
      values (${tenant.id}, 'object', 'resource', ${channel.id}, 'allow') returning id`;
    await sql`insert into permission_block_actions (block_id, action_id) select ${block.id}, id from actions where name in ('publish', 'subscribe')`;
    await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${tenant.id}, 'entity', ${device.id}, ${block.id})`;
    const data = await graphql(ctx.ports.http, 'mutation ($id: ID!) { createSharedKey(entityId: $id) { key } }', { id: device.id }, admin);
    const [{ commits }] = await sql`select xact_commit::float8 as commits from pg_stat_database where datname = current_database()`;
    return { workspaceId: tenant.id, channelId: channel.id, deviceId: device.id, key: data.createSharedKey.key, admin, commitsBefore: commits };
  } finally {
    await sql.end();
  }
}

/**
 * Stored rows of the channel against acknowledged records; a shortfall is reported and counted as errors.
 * @param {any} ctx @param {any} result @param {number} recordsPerRequest @param {string} name
 */
export async function checkStored(ctx, result, recordsPerRequest, name) {
  const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select count(*)::int as n from messages where channel_id = ${ctx.data.channelId}`;
    // Every committed transaction of the database since setup: the batches, plus a few from elsewhere
    // (usage stamps, statistics), so rows per commit is a slight underestimate of the batch size.
    const [{ commits }] = await sql`select xact_commit::float8 as commits from pg_stat_database where datname = current_database()`;
    const acknowledgedRecords = result.acknowledged * recordsPerRequest;
    const missing = acknowledgedRecords - row.n;
    if (missing > 0) console.error(`bench: ${name}: ${missing} acknowledged messages missing from storage`);
    const rowsPerCommit = row.n / Math.max(1, commits - ctx.data.commitsBefore);
    return { acknowledgedRecords, stored: row.n, missing: Math.max(0, missing), errors: result.errors + Math.max(0, missing), rowsPerCommit };
  } finally {
    await sql.end();
  }
}

/** @param {string} name @param {string} body @param {number} records */
export function ingestScenario(name, body, records) {
  return {
    name,
    env: INGEST_BENCH_ENV,
    async setup(/** @type {any} */ ctx) {
      return setupChannel(ctx, name);
    },
    request: (/** @type {any} */ ctx) => ({
      listener: 'messaging',
      method: 'POST',
      path: `/http/m/${ctx.data.workspaceId}/c/${ctx.data.channelId}`,
      headers: { 'content-type': 'application/senml+json', authorization: `Client ${ctx.data.key}` },
      body,
      expectedStatus: 202,
    }),
    async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
      return checkStored(ctx, result, records, name);
    },
  };
}

export default {
  ...ingestScenario('ingest-http-1', ONE_RECORD, 1),
  description: 'HTTP publish, one SenML record per request, 202 after commit (target: <= 4x the bare handler CPU per request, database included)',
  target: { efficiency: 0.25 },
};
