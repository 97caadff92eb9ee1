// Owns the list floor: the least this stack (uWebSockets.js, postgres.js, PostgreSQL) spends answering one
// page of a management list. POST /<list> with the GraphQL request's body: the body is read and
// JSON-parsed (the tenant comes from variables.t), two plain prepared statements run (the total, then the
// page's rows with the columns the benchmark's query asks for) and the answer is JSON.stringify'd in the
// GraphQL shape. No authentication, authorization, GraphQL or validation: the list benchmarks
// (lib/list-bench.js) divide the service's CPU per answer by this floor's, in the same run.
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);
/** The entry file as the service starter takes it: relative to the repository root. */
export const LIST_FLOOR_ENTRY = relative(repoRoot, selfPath);

/**
 * Per list: the total and the page, the same rows in the same order as the service's list answers.
 * `t` is the tenant (for tenants: the one tenant a tenant admin sees, or null for every tenant).
 * @type {Record<string, {field: string, total: (sql: any, t: string | null) => any, page: (sql: any, t: string | null) => any}>}
 */
const LISTS = {
  entities: {
    field: 'entities',
    total: (sql, t) => sql`select count(*)::int as n from entities where tenant_id = ${t} and deleted_at is null`,
    page: (sql, t) => sql`select id, name, kind, status, created_at as "createdAt" from entities
      where tenant_id = ${t} and deleted_at is null order by created_at, id limit 50`,
  },
  resources: {
    field: 'resources',
    total: (sql, t) => sql`select count(*)::int as n from resources where tenant_id = ${t} and deleted_at is null`,
    page: (sql, t) => sql`select id, name, kind, created_at as "createdAt" from resources
      where tenant_id = ${t} and deleted_at is null order by created_at, id limit 50`,
  },
  groups: {
    field: 'groups',
    total: (sql, t) => sql`select count(*)::int as n from groups where tenant_id = ${t} and deleted_at is null`,
    page: (sql, t) => sql`select id, name, group_type as "groupType", created_at as "createdAt" from groups
      where tenant_id = ${t} and deleted_at is null order by created_at, id limit 50`,
  },
  tenants: {
    field: 'tenants',
    total: (sql, t) => (t === null
      ? sql`select count(*)::int as n from tenants where deleted_at is null`
      : sql`select count(*)::int as n from tenants where id = ${t} and deleted_at is null`),
    page: (sql, t) => (t === null
      ? sql`select id, name, status, created_at as "createdAt" from tenants where deleted_at is null order by created_at, id limit 50`
      : sql`select id, name, status, created_at as "createdAt" from tenants where id = ${t} and deleted_at is null order by created_at, id limit 50`),
  },
  certificates: {
    field: 'certificates',
    total: (sql, t) => sql`select count(*)::int as n from credentials c join entities e on e.id = c.entity_id
      where c.kind = 'certificate' and e.tenant_id = ${t}`,
    page: (sql, t) => sql`select c.id as "credentialId", c.identifier as "serialNumber", c.status from credentials c
      join entities e on e.id = c.entity_id where c.kind = 'certificate' and e.tenant_id = ${t}
      order by c.created_at desc, c.id limit 50`,
  },
  auditLogs: {
    field: 'auditLogs',
    total: (sql, t) => sql`select count(*)::int as n from audit_log where tenant_id = ${t}`,
    page: (sql, t) => sql`select id, event, outcome, created_at as "createdAt" from audit_log
      where tenant_id = ${t} order by created_at desc, id desc limit 50`,
  },
};

async function serveFloor() {
  const uws = nativeUws('a list floor');
  // The service's own postgres.js, pooled like the service's (SVC_DB_POOL_MAX default 10).
  const postgres = createRequire(join(repoRoot, 'package.json'))('postgres');
  const sql = postgres(process.env.DATABASE_URL, { max: 10, prepare: true, onnotice: () => {} });
  const app = uws.App();
  for (const [name, list] of Object.entries(LISTS)) {
    app.post(`/${name}`, (/** @type {any} */ res) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      /** @type {Buffer[]} */
      const chunks = [];
      res.onData((/** @type {ArrayBuffer} */ chunk, /** @type {boolean} */ last) => {
        chunks.push(Buffer.from(chunk.slice(0)));
        if (!last) return;
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const t = body.variables?.t ?? null;
        Promise.all([list.total(sql, t), list.page(sql, t)]).then(([[{ n }], items]) => {
          const answer = JSON.stringify({ data: { [list.field]: { total: n, items } } });
          if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(answer));
        }, (/** @type {unknown} */ err) => {
          console.error(JSON.stringify({ level: 'error', msg: 'list floor query failed', err: String(err) }));
          if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
        });
      });
    });
  }
  await listenAndAnnounce(uws, app, 'http', 'the list floor');
  // Exit with the bench (spawned with an IPC channel).
  process.on('disconnect', () => process.exit(0));
}

if (process.argv[1] === selfPath) await serveFloor();
