// Scenario: GraphQL `entities(tenantId, limit: 50)` on a tenant holding 100k entities, through the
// compiled-query path; the statement the service runs is EXPLAINed (ANALYZE) and kept in the result.
import postgres from 'postgres';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { AUTH_BENCH_ENV, adminSession, graphql } from './auth-whoami-anon.js';
import { repoRoot } from '../lib/paths.js';

const ENTITIES = 100_000;
const QUERY = 'query ($t: ID!) { entities(tenantId: $t, limit: 50) { total items { id name kind status attributes createdAt } } }';

/** The service's own query builder (from dist), run through a client that records the SQL it sends. */
async function explainServiceQuery(databaseUrl, tenantId) {
  const { listEntities } = await import(pathToFileURL(path.join(repoRoot, 'dist/src/identity/queries.js')).href);
  /** @type {{query: string, params: unknown[]} | null} */
  let seen = null;
  const sql = postgres(databaseUrl, { max: 1, debug: (_c, query, params) => { if (!seen && /from entities e/.test(query)) seen = { query, params }; } });
  try {
    await listEntities(sql, { tenantId, readableTenantIds: null, deleted: 'live', order: 'created_at', dir: 'asc' }, { limit: 50, offset: 0 });
    if (!seen) throw new Error('the list statement was not observed');
    const plan = await sql.unsafe(`explain (analyze, buffers, format text) ${seen.query}`, /** @type {any[]} */ (seen.params));
    return plan.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await sql.end();
  }
}

export default {
  name: 'entities-list',
  description: `POST /graphql entities(tenantId, limit: 50) on a tenant with ${ENTITIES / 1000}k entities`,
  env: AUTH_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    const token = await adminSession(ctx.ports.http);
    const tenant = (await graphql(ctx.ports.http, 'mutation { createTenant(input: {name: "bench-fleet"}) { id } }', {}, token)).createTenant.id;
    const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
    try {
      await sql`
        insert into entities (kind, name, tenant_id, attributes, created_at)
        select 'device', 'device-' || g, ${tenant}, jsonb_build_object('n', g), now() - (g || ' seconds')::interval
        from generate_series(1, ${ENTITIES}) g`;
      await sql`vacuum analyze entities`;
    } finally {
      await sql.end();
    }
    const plan = await explainServiceQuery(ctx.databaseUrl, tenant);
    if (!/Index/.test(plan)) throw new Error(`the list query does not use an index:\n${plan}`);
    return { token, body: JSON.stringify({ query: QUERY, variables: { t: tenant } }), plan };
  },
  request: (/** @type {any} */ ctx) => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.data.token}` },
    body: ctx.data.body,
    expectedStatus: 200,
  }),
  async teardown(/** @type {any} */ ctx) {
    console.log(`entities-list: query plan of the service's statement\n${ctx.data.plan}`);
    return { queryPlan: ctx.data.plan };
  },
};
