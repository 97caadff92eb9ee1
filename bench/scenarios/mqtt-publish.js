// Scenario: MQTT QoS 1 publishes into storage. --connections MQTT clients (one device each), each with one
// PUBLISH in flight (send, await PUBACK, repeat): PUBACK comes after the message's batch is committed.
// CPU = the service process + every PostgreSQL process; afterwards the stored rows are counted against the
// PUBACKs received (a mismatch is an error). mqtt-mosquitto runs the same load against the machine's
// Mosquitto (no storage) for reference. Also exports the driver both use.
import mqtt from 'mqtt';
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from '../lib/cpu.js';
import { AUTH_BENCH_ENV, adminSession, graphql } from './auth-whoami-anon.js';

export const MQTT_BENCH_ENV = { ...AUTH_BENCH_ENV, SVC_MQTT_ADDR: '127.0.0.1:0' };
const PAYLOAD = JSON.stringify([{ bn: 'urn:dev:bench:', n: 'temp', u: 'Cel', v: 21.5 }]);

/**
 * Connects the clients, warms up, then measures a window in which every client keeps one QoS 1 PUBLISH in
 * flight; each client's last publish is awaited, never cut.
 * @param {any} ctx
 * @param {{port: number, clients: {username?: string, password?: string, topic: string}[], roots: Record<string, number>, includePostgres: boolean, inflight?: number}} opts
 */
export async function driveMqtt(ctx, { port, clients, roots, includePostgres, inflight = 1 }) {
  const conns = await Promise.all(clients.map((c, i) => new Promise((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
      clientId: `bench-${process.pid}-${i}`, username: c.username, password: c.password, reconnectPeriod: 0, clean: true, connectTimeout: 10_000,
    });
    client.once('connect', () => resolve({ client, topic: c.topic }));
    client.once('error', reject);
  })));
  const hist = ctx.createHistogram();
  let phase = 'warmup';
  let acknowledged = 0;
  let inWindow = 0;
  let errors = 0;
  const publishOnce = (/** @type {any} */ c) => new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    c.client.publish(c.topic, PAYLOAD, { qos: 1 }, (/** @type {Error|undefined} */ err) => {
      if (err) errors++;
      else {
        acknowledged++;
        if (phase === 'window') {
          inWindow++;
          hist.recordValue(Math.max(1, Number(process.hrtime.bigint() - t0) / 1000));
        }
      }
      resolve(undefined);
    });
  });
  // `inflight` loops per client: PUBLISHes pipelined on one connection, as MQTT clients do.
  const loops = conns.flatMap((c) => Array.from({ length: inflight }, async () => {
    while (phase !== 'done' && c.client.connected) await publishOnce(c);
  }));
  await new Promise((r) => setTimeout(r, ctx.warmupSeconds * 1000));
  const before = takeCpuSnapshot(roots, { includePostgres });
  const windowStart = process.hrtime.bigint();
  phase = 'window';
  await new Promise((r) => setTimeout(r, ctx.durationSeconds * 1000));
  phase = 'done';
  await Promise.all(loops);
  const wallSeconds = Number(process.hrtime.bigint() - windowStart) / 1e9;
  const cpu = diffCpuSnapshots(before, takeCpuSnapshot(roots, { includePostgres }));
  await Promise.all(conns.map((c) => new Promise((r) => c.client.end(false, {}, r))));
  const { generator = 0, ...server } = cpu.cpuSeconds;
  return {
      requests: inWindow,
      wallSeconds,
      reqPerSec: inWindow / wallSeconds,
      p50Us: hist.getValueAtPercentile(50),
      p99Us: hist.getValueAtPercentile(99),
      maxUs: hist.maxValue,
      errors,
      serverCpuSeconds: server,
      generatorCpuShare: generator / wallSeconds,
      otherCpuSeconds: cpu.otherCpuSeconds ?? null,
      acknowledged,
    };
  }

  /** @param {string} name @param {number} inflight */
  export function publishScenario(name, inflight) {
  return {
    name,
    description: `MQTT QoS 1 PUBLISH (one SenML record), PUBACK after commit: ${inflight} in flight per client (compare ${name.replace('publish', 'mosquitto')})`,
    env: MQTT_BENCH_ENV,
    server: 'service',
    async setup(/** @type {any} */ ctx) {
      const admin = await adminSession(ctx.ports.http);
      const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
      try {
        const [tenant] = await sql`insert into tenants (name, alias, status) values (${`mqtt bench ${name} ${Date.now()}`}, ${`mqtt-bench-${Date.now()}`}, 'active') returning id`;
        const [channel] = await sql`insert into resources (kind, name, tenant_id) values ('channel', 'bench channel', ${tenant.id}) returning id`;
        const [block] = await sql`insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id, effect)
          values (${tenant.id}, 'object', 'resource', ${channel.id}, 'allow') returning id`;
        await sql`insert into permission_block_actions (block_id, action_id) select ${block.id}, id from actions where name = 'publish'`;
        const clients = [];
        for (let i = 0; i < ctx.connections; i++) {
          const [device] = await sql`insert into entities (kind, name, tenant_id, status) values ('device', ${`bench-device-${i}`}, ${tenant.id}, 'active') returning id`;
          await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${tenant.id}, 'entity', ${device.id}, ${block.id})`;
          const data = await graphql(ctx.ports.http, 'mutation ($id: ID!) { createSharedKey(entityId: $id) { key } }', { id: device.id }, admin);
          clients.push({ username: device.id, password: data.createSharedKey.key, topic: `m/${tenant.id}/c/${channel.id}` });
        }
        return { channelId: channel.id, clients };
      } finally {
        await sql.end();
      }
    },
    async run(/** @type {any} */ ctx) {
      return driveMqtt(ctx, { port: ctx.target.ports.mqtt, clients: ctx.data.clients, roots: { service: ctx.target.pid, generator: process.pid }, includePostgres: true, inflight });
    },
    async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
      const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
      try {
        const [row] = await sql`select count(*)::int as n from messages where channel_id = ${ctx.data.channelId}`;
        const missing = result.acknowledged - row.n;
        if (missing > 0) console.error(`bench: ${name}: ${missing} acknowledged messages missing from storage`);
        return { stored: row.n, missing: Math.max(0, missing), errors: result.errors + Math.max(0, missing) };
      } finally {
        await sql.end();
      }
    },
  };
}

export default publishScenario('mqtt-publish', 1);
