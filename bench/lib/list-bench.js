// Owns the list scenarios' measurement (issue 38): the service and the list floor (list-floor-server.js)
// on one database holding a world of 100,000 entities, the same page asked of each in alternating windows
// (--rounds): the floor, the platform administrator, then a tenant administrator (whose readable scope
// filters the rows). CPU per answer counts the server process and the PostgreSQL backends of the run's
// database on both sides (background processes such as the WAL writer are left out: reads barely use them);
// the efficiency is the floor's CPU per answer over the service's, for the costlier of the two callers.
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from './cpu.js';
import { startLoad } from './load.js';
import { startService } from './service.js';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';
import { LIST_FLOOR_ENTRY } from './list-floor-server.js';
import { AUTH_BENCH_ENV, adminSession, graphql } from '../scenarios/auth-whoami-anon.js';

/** The fleet the lists page through; the rest of the 100,000 entities belong to other tenants. */
export const FLEET = 1000;
export const ENTITIES = 100_000;
const OTHER_TENANTS = 999;
const PASSWORD = 'fleet-admin-password-0123456789';

/**
 * The world: Alice (a human) created the tenant "fleet" and administers it; the fleet holds FLEET devices,
 * resources, object groups, certificates and audit entries; OTHER_TENANTS more tenants hold the rest
 * (ENTITIES - FLEET entities, and ten times the fleet's resources, groups, certificates and entries).
 * @param {{httpPort: number, databaseUrl: string}} at
 */
export async function seedListWorld({ httpPort, databaseUrl }) {
  const admin = await adminSession(httpPort);
  const alice = (await graphql(httpPort, 'mutation { createEntity(input: {kind: human, name: "alice"}) { id } }', {}, admin)).createEntity.id;
  await graphql(httpPort, 'mutation ($id: ID!, $pw: String!) { createPassword(entityId: $id, password: $pw) }', { id: alice, pw: PASSWORD }, admin);
  const aliceToken = (await graphql(httpPort, 'mutation ($i: LoginInput!) { login(input: $i) { token } }', { i: { identifier: alice, secret: PASSWORD } })).login.token;
  const fleet = (await graphql(httpPort, 'mutation { createTenant(input: {name: "fleet", alias: "fleet"}) { id } }', {}, aliceToken)).createTenant.id;
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const others = (await sql`
      insert into tenants (name, created_at) select 'tenant-' || g, now() - (g || ' minutes')::interval
      from generate_series(1, ${OTHER_TENANTS}) g returning id`).map((r) => r.id);
    // Rows of one kind: `fleetRows` in the fleet, `otherRows` spread over the other tenants.
    const spread = (/** @type {number} */ fleetRows, /** @type {number} */ otherRows) => sql`
      select g, case when g <= ${fleetRows} then ${fleet}::uuid else (${others}::uuid[])[1 + g % ${OTHER_TENANTS}] end as tenant_id,
             now() - (g || ' seconds')::interval as at
      from generate_series(1, ${fleetRows + otherRows}) g`;
    await sql`insert into entities (kind, name, tenant_id, attributes, created_at)
      select 'device', 'device-' || g, tenant_id, jsonb_build_object('n', g), at from (${spread(FLEET, ENTITIES - FLEET)}) s`;
    await sql`insert into resources (kind, name, tenant_id, created_at)
      select 'channel', 'channel-' || g, tenant_id, at from (${spread(FLEET, 10 * FLEET)}) s`;
    await sql`insert into groups (name, tenant_id, group_type, created_at)
      select 'group-' || g, tenant_id, 'object', at from (${spread(FLEET, 10 * FLEET)}) s`;
    await sql`insert into audit_log (event, outcome, tenant_id, actor_entity_id, target_kind, target_id, details, created_at)
      select 'entity.update', 'allow', tenant_id, ${alice}, 'entity', g::text, jsonb_build_object('n', g), at from (${spread(FLEET, 10 * FLEET)}) s`;
    // One certificate per device of the first 11,000 devices (the fleet's first): rows as issuance
    // writes them, minus the PEM (the benchmark's query does not ask for it).
    await sql`insert into credentials (entity_id, kind, identifier, issuer_id, status, metadata, expires_at, created_at)
      select e.id, 'certificate', md5(e.id::text), '00000000-0000-4000-8000-0000000000ca', 'active',
             jsonb_build_object('fingerprint_sha256', md5('f' || e.id::text), 'tenant_id', e.tenant_id), now() + interval '1 year', e.created_at
      from entities e where e.kind = 'device' order by e.created_at desc limit ${11 * FLEET}`;
    await sql`vacuum analyze`;
  } finally {
    await sql.end();
  }
  return { adminToken: admin, aliceToken, fleet };
}

/**
 * One window of load on one server.
 * @param {any} ctx @param {string} scenarioFile @param {{pid: number, ports: Record<string, number>}} server
 * @param {string} group @param {{path: string, body: string, token: string | null}} request
 */
async function window(ctx, scenarioFile, server, group, request, postgresDatabase) {
  let before = null;
  let after = null;
  const roots = (/** @type {number} */ pid) => ({ [group]: server.pid, generator: pid });
  const { done } = startLoad({
    scenarioFile,
    ctx: { ports: { http: server.ports.http }, data: request },
    connections: ctx.connections, warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (pid) => (before = takeCpuSnapshot(roots(pid), { includePostgres: true, postgresBackendsOf: postgresDatabase })),
    onWindowEnd: (pid) => (after = takeCpuSnapshot(roots(pid), { includePostgres: true, postgresBackendsOf: postgresDatabase })),
  });
  const load = await done;
  if (!before || !after) throw new Error('load generator finished without reporting its window');
  const cpu = diffCpuSnapshots(before, after);
  const { generator = 0, ...serverCpu } = cpu.cpuSeconds;
  const total = Object.values(serverCpu).reduce((a, b) => a + b, 0);
  return {
    ...load, serverCpuSeconds: serverCpu, generatorCpu: generator, otherCpuSeconds: cpu.otherCpuSeconds,
    cpuPerRequestUs: load.requests ? (total / load.requests) * 1e6 : null,
    pgCpuPerRequestUs: load.requests ? ((serverCpu.postgres ?? 0) / load.requests) * 1e6 : null,
  };
}

/** @param {any[]} ws */
function pool(ws) {
  const sum = (/** @type {(w: any) => number} */ f) => ws.reduce((a, w) => a + f(w), 0);
  const requests = sum((w) => w.requests);
  const wallSeconds = sum((w) => w.wallSeconds);
  const cpu = sum((w) => Object.values(w.serverCpuSeconds).reduce((a, b) => a + b, 0));
  const pg = sum((w) => w.serverCpuSeconds.postgres ?? 0);
  const p50s = ws.map((w) => w.p50Us).sort((a, b) => a - b);
  /** @type {Record<string, number>} */
  const serverCpuSeconds = {};
  for (const w of ws) for (const [g, v] of Object.entries(w.serverCpuSeconds)) serverCpuSeconds[g] = (serverCpuSeconds[g] ?? 0) + /** @type {number} */ (v);
  return {
    requests, wallSeconds, serverCpuSeconds, reqPerSec: requests / wallSeconds,
    cpuPerRequestUs: requests ? (cpu / requests) * 1e6 : null, pgCpuPerRequestUs: requests ? (pg / requests) * 1e6 : null,
    p50Us: p50s[Math.floor(p50s.length / 2)] ?? null, p99Us: Math.max(...ws.map((w) => w.p99Us ?? 0)), maxUs: Math.max(...ws.map((w) => w.maxUs ?? 0)),
    errors: sum((w) => w.errors), generatorCpuShare: sum((w) => w.generatorCpu) / wallSeconds, otherCpuSeconds: sum((w) => w.otherCpuSeconds ?? 0),
  };
}

const median = (/** @type {number[]} */ xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * A list scenario: `query` is the GraphQL text (variable $t: the fleet), `floor` the floor's route, and
 * `tenantScoped` whether the floor's statements for the tenant admin take the fleet (tenants lists every
 * tenant for the platform administrator, only the fleet for its administrator).
 * @param {{name: string, description: string, file: string, query: string, floor: string, everyTenantForAdmin?: boolean}} def
 */
export function listScenario(def) {
  return {
    name: def.name,
    description: def.description,
    // The harness starts nothing: run() starts the service and the floor side by side.
    server: 'none',
    connections: 64,
    // At most twice the floor's CPU per answer (issue 38; the moonshot is 1.5x).
    target: { efficiency: 0.5 },
    request: (/** @type {any} */ ctx) => ({
      method: 'POST', path: ctx.data.path, body: ctx.data.body, expectedStatus: 200,
      headers: { 'content-type': 'application/json', ...(ctx.data.token ? { authorization: `Bearer ${ctx.data.token}` } : {}) },
    }),
    async run(/** @type {any} */ ctx) {
      const service = await startService({ env: AUTH_BENCH_ENV });
      const floor = await spawnServer({ args: [LIST_FLOOR_ENTRY], cwd: repoRoot, env: { DATABASE_URL: service.databaseUrl }, name: 'list floor', ipc: true });
      try {
        const world = await seedListWorld({ httpPort: service.ports.http, databaseUrl: service.databaseUrl });
        // PostgreSQL's share is the backends of this run's database only: on a machine shared with other
        // work, every PostgreSQL process would carry other databases' queries.
        const database = new URL(service.databaseUrl).pathname.slice(1);
        const body = (/** @type {string | null} */ t) => JSON.stringify({ query: def.query, variables: t ? { t } : {} });
        const adminT = def.everyTenantForAdmin ? null : world.fleet;
        const check = async (/** @type {string} */ token, /** @type {string | null} */ t) => {
          const answer = await graphql(service.ports.http, def.query, t ? { t } : {}, token);
          const list = Object.values(answer)[0];
          if (!list || !(list.items.length > 0)) throw new Error(`${def.name}: empty answer ${JSON.stringify(answer)}`);
          return list.total;
        };
        const totals = { admin: await check(world.adminToken, adminT), tenantAdmin: await check(world.aliceToken, world.fleet) };
        const sides = {
          floorAdmin: { server: floor, group: 'floor', request: { path: `/${def.floor}`, body: body(adminT), token: null } },
          floorTenantAdmin: { server: floor, group: 'floor', request: { path: `/${def.floor}`, body: body(world.fleet), token: null } },
          admin: { server: service, group: 'service', request: { path: '/graphql', body: body(adminT), token: world.adminToken } },
          tenantAdmin: { server: service, group: 'service', request: { path: '/graphql', body: body(world.fleet), token: world.aliceToken } },
        };
        const sameFloor = !def.everyTenantForAdmin;
        /** @type {Record<string, any[]>} */
        const windows = { floorAdmin: [], floorTenantAdmin: [], admin: [], tenantAdmin: [] };
        for (let round = 1; round <= (ctx.rounds ?? 1); round++) {
          for (const side of /** @type {(keyof typeof sides)[]} */ (['floorAdmin', 'admin', 'floorTenantAdmin', 'tenantAdmin'])) {
            if (side === 'floorTenantAdmin' && sameFloor) continue;
            const s = sides[side];
            windows[side].push(await window(ctx, def.file, s.server, s.group, s.request, database));
          }
          if (sameFloor) windows.floorTenantAdmin.push(windows.floorAdmin[windows.floorAdmin.length - 1]);
          const last = (/** @type {string} */ k) => windows[k][windows[k].length - 1];
          const line = (/** @type {string} */ who, /** @type {string} */ f) => `${who} ${Math.round(last(who).reqPerSec)}/s ${last(who).cpuPerRequestUs.toFixed(0)} µs `
            + `(pg ${last(who).pgCpuPerRequestUs.toFixed(0)}), ratio ${(last(who).cpuPerRequestUs / last(f).cpuPerRequestUs).toFixed(2)}`;
          console.error(`bench: ${def.name} #${round}: floor ${Math.round(last('floorAdmin').reqPerSec)}/s ${last('floorAdmin').cpuPerRequestUs.toFixed(0)} µs `
            + `(pg ${last('floorAdmin').pgCpuPerRequestUs.toFixed(0)}); ${line('admin', 'floorAdmin')}; ${line('tenantAdmin', 'floorTenantAdmin')}`);
        }
        const ratios = (/** @type {string} */ who, /** @type {string} */ f) => windows[who].map((w, i) => w.cpuPerRequestUs / windows[f][i].cpuPerRequestUs);
        const admin = { ...pool(windows.admin), ratios: ratios('admin', 'floorAdmin'), floor: pool(windows.floorAdmin) };
        const tenantAdmin = { ...pool(windows.tenantAdmin), ratios: ratios('tenantAdmin', 'floorTenantAdmin'), floor: pool(windows.floorTenantAdmin) };
        const worse = median(admin.ratios) >= median(tenantAdmin.ratios) ? admin : tenantAdmin;
        console.error(`bench: ${def.name}: median ratio admin ${median(admin.ratios).toFixed(2)} [${admin.ratios.map((r) => r.toFixed(2)).join(', ')}], `
          + `tenant admin ${median(tenantAdmin.ratios).toFixed(2)} [${tenantAdmin.ratios.map((r) => r.toFixed(2)).join(', ')}]`);
        return {
          ...worse,
          // The reference of this scenario's efficiency (lib/report.js reads it): the floor, same run.
          baselineCpuPerRequestUs: worse.floor.cpuPerRequestUs,
          medianRatio: { admin: median(admin.ratios), tenantAdmin: median(tenantAdmin.ratios) },
          totals, admin, tenantAdmin,
        };
      } finally {
        await floor.stop();
        await service.stop();
      }
    },
  };
}
