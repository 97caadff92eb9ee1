// Owns the gRPC scenarios' measurement: the service (gRPC on) and the empty-method baseline
// (grpc-bare-server.js) side by side, the same calls over one channel to each, in alternating rounds
// (--rounds), CPU per call pooled per side. The efficiency is judged against the empty method measured in
// this run, not against the uWS handler: the harness's bare row is not this scenario's reference.
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from './cpu.js';
import { startGrpcBareServer } from './grpc-bare-server.js';
import { startGrpcLoad } from './grpc-load.js';
import { startService } from './service.js';
import { AUTH_BENCH_ENV, adminSession, graphql } from '../scenarios/auth-whoami-anon.js';

export const GRPC_BENCH_ENV = { ...AUTH_BENCH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0' };
const DEVICES = 16;

/**
 * A world for the runtime calls: one tenant with DEVICES devices (a shared key each) allowed to publish to
 * one channel, and a protocol adapter (a global service entity with authz.check at platform scope) whose
 * session token is the callers' bearer.
 * @param {{httpPort: number, databaseUrl: string}} at
 */
export async function seedAdapterWorld({ httpPort, databaseUrl }) {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const stamp = Date.now().toString(36);
  let tenant, channel, adapter;
  const devices = [];
  try {
    [{ id: tenant }] = await sql`insert into tenants (name, alias) values (${`grpc bench ${stamp}`}, ${`grpc-bench-${stamp}`}) returning id`;
    [{ id: channel }] = await sql`insert into resources (kind, name, tenant_id) values ('channel', 'bench channel', ${tenant}) returning id`;
    const [{ id: publish }] = await sql`insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id) values (${tenant}, 'object', 'resource', ${channel}) returning id`;
    await sql`insert into permission_block_actions (block_id, action_id) select ${publish}, id from actions where name = 'publish'`;
    for (let i = 0; i < DEVICES; i++) {
      const [{ id }] = await sql`insert into entities (kind, name, tenant_id) values ('device', ${`grpc-bench-device-${i}`}, ${tenant}) returning id`;
      await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${tenant}, 'entity', ${id}, ${publish})`;
      devices.push(id);
    }
    [{ id: adapter }] = await sql`insert into entities (kind, name) values ('service', ${`grpc-bench-adapter-${stamp}`}) returning id`;
    const [{ id: check }] = await sql`insert into permission_blocks (scope_mode) values ('platform') returning id`;
    await sql`insert into permission_block_actions (block_id, action_id) select ${check}, id from actions where name = 'authz.check'`;
    await sql`insert into direct_policies (subject_kind, entity_id, block_id) values ('entity', ${adapter}, ${check})`;
  } finally {
    await sql.end();
  }
  const admin = await adminSession(httpPort);
  const password = `adapter-password-${stamp}`;
  await graphql(httpPort, 'mutation ($id: ID!, $pw: String!) { createPassword(entityId: $id, password: $pw) }', { id: adapter, pw: password }, admin);
  const token = (await graphql(httpPort, 'mutation ($i: LoginInput!) { login(input: $i) { token } }', { i: { identifier: adapter, secret: password } })).login.token;
  const keys = [];
  for (const id of devices) keys.push((await graphql(httpPort, 'mutation ($id: ID!) { createSharedKey(entityId: $id) { key } }', { id }, admin)).createSharedKey.key);
  return { tenant, channel, devices, keys, token };
}

/**
 * One window of load on one server.
 * @param {any} ctx @param {{pid: number, ports: Record<string, number>}} server @param {string} group
 * @param {{service: string, method: string, requests: Record<string, unknown>[], token: string}} spec
 */
async function window(ctx, server, group, spec) {
  let before = null;
  let after = null;
  const opts = { includePostgres: group === 'service' };
  const { done } = startGrpcLoad({
    ...spec, target: `127.0.0.1:${server.ports.grpc}`, concurrency: ctx.connections,
    warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (pid) => (before = takeCpuSnapshot({ [group]: server.pid, generator: pid }, opts)),
    onWindowEnd: (pid) => (after = takeCpuSnapshot({ [group]: server.pid, generator: pid }, opts)),
  });
  const load = await done;
  if (!before || !after) throw new Error('grpc load generator finished without reporting its window');
  const cpu = diffCpuSnapshots(before, after);
  const { generator = 0, ...serverCpu } = cpu.cpuSeconds;
  const total = Object.values(serverCpu).reduce((a, b) => a + b, 0);
  return {
    ...load, serverCpuSeconds: serverCpu, generatorCpu: generator, otherCpuSeconds: cpu.otherCpuSeconds,
    cpuPerCallUs: load.requests ? (total / load.requests) * 1e6 : null,
    // The server process alone: the postgres group is every PostgreSQL process on the machine, so on a
    // shared machine it carries other people's queries; the common case here runs none of its own.
    processCpuPerCallUs: load.requests ? ((serverCpu[group] ?? 0) / load.requests) * 1e6 : null,
  };
}

/** @param {any[]} ws */
function pool(ws) {
  const sum = (/** @type {(w: any) => number} */ f) => ws.reduce((a, w) => a + f(w), 0);
  /** @type {Record<string, number>} */
  const serverCpuSeconds = {};
  for (const w of ws) for (const [g, s] of Object.entries(w.serverCpuSeconds)) serverCpuSeconds[g] = (serverCpuSeconds[g] ?? 0) + /** @type {number} */ (s);
  const requests = sum((w) => w.requests);
  const wallSeconds = sum((w) => w.wallSeconds);
  const cpu = Object.values(serverCpuSeconds).reduce((a, b) => a + b, 0);
  const processCpu = cpu - (serverCpuSeconds.postgres ?? 0);
  const p50s = ws.map((w) => w.p50Us).sort((a, b) => a - b);
  return {
    requests, wallSeconds, reqPerSec: requests / wallSeconds, serverCpuSeconds, cpuPerCallUs: requests ? (cpu / requests) * 1e6 : null,
    processCpuPerCallUs: requests ? (processCpu / requests) * 1e6 : null,
    p50Us: p50s[Math.floor(p50s.length / 2)] ?? null, p99Us: Math.max(...ws.map((w) => w.p99Us ?? 0)), maxUs: Math.max(...ws.map((w) => w.maxUs ?? 0)),
    errors: sum((w) => w.errors), generatorCpuShare: sum((w) => w.generatorCpu) / wallSeconds, otherCpuSeconds: sum((w) => w.otherCpuSeconds ?? 0),
  };
}

/**
 * `env` adds service settings; `prepare` makes what the requests need beyond the world (certificates, ...).
 * @param {{name: string, description: string, service: string, method: string, env?: Record<string, string>,
 *   prepare?: (world: Awaited<ReturnType<typeof seedAdapterWorld>>, service: {ports: Record<string, number>}) => Promise<any>,
 *   requestsOf: (world: Awaited<ReturnType<typeof seedAdapterWorld>>, prepared?: any) => Record<string, unknown>[]}} def
 */
export function grpcScenario(def) {
  return {
    name: def.name,
    description: def.description,
    // The harness starts nothing: run() starts the service and the baseline side by side.
    server: 'none',
    connections: 64,
    // At most twice the empty method's server CPU per call (issue 28).
    target: { efficiency: 0.5 },
    async run(/** @type {any} */ ctx) {
      const service = await startService({ env: { ...GRPC_BENCH_ENV, ...def.env } });
      const bare = await startGrpcBareServer();
      try {
        const world = await seedAdapterWorld({ httpPort: service.ports.http, databaseUrl: service.databaseUrl });
        const prepared = def.prepare ? await def.prepare(world, service) : undefined;
        const spec = { service: def.service, method: def.method, requests: def.requestsOf(world, prepared), token: world.token };
        const pairs = [];
        for (let round = 1; round <= (ctx.rounds ?? 1); round++) {
          const empty = await window(ctx, bare, 'bare', spec);
          const own = await window(ctx, service, 'service', spec);
          pairs.push({ empty, own });
          console.error(`bench: ${def.name} #${round}: ${Math.round(own.reqPerSec)} calls/s, ${own.cpuPerCallUs?.toFixed(1)} µs/call `
            + `(process alone ${own.processCpuPerCallUs?.toFixed(1)}); empty method ${Math.round(empty.reqPerSec)} calls/s, `
            + `${empty.cpuPerCallUs?.toFixed(1)} µs/call; ratio ${(own.cpuPerCallUs / empty.cpuPerCallUs).toFixed(2)} `
            + `(process alone ${(own.processCpuPerCallUs / empty.processCpuPerCallUs).toFixed(2)})`);
        }
        const own = pool(pairs.map((p) => p.own));
        const empty = pool(pairs.map((p) => p.empty));
        if (own.errors) console.error(`bench: ${def.name}: ${own.errors} calls failed: ${JSON.stringify(pairs.map((p) => p.own.errorCodes))}`);
        return {
          ...own,
          // The reference of this scenario's efficiency (lib/report.js reads it): the empty method, same run.
          baselineCpuPerRequestUs: empty.cpuPerCallUs,
          cpuRatio: own.cpuPerCallUs && empty.cpuPerCallUs ? own.cpuPerCallUs / empty.cpuPerCallUs : null,
          processCpuRatio: own.processCpuPerCallUs && empty.processCpuPerCallUs ? own.processCpuPerCallUs / empty.processCpuPerCallUs : null,
          emptyMethod: empty,
          rounds: pairs.map((p) => ({
            own: p.own, empty: p.empty, ratio: p.own.cpuPerCallUs / p.empty.cpuPerCallUs, efficiency: p.empty.cpuPerCallUs / p.own.cpuPerCallUs,
          })),
        };
      } finally {
        await bare.stop();
        await service.stop();
      }
    },
  };
}
