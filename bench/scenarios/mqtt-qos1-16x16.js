// Scenario: issue 37's shape. MQTT 3.1.1 QoS 1, one SenML record per message, 16 connections × 16
// PUBLISHes in flight, from a raw-TCP generator in its own process (lib/mqtt-load.js), against the service
// (PUBACK after commit; CPU = service process + every PostgreSQL process) and against the machine's
// Mosquitto on 127.0.0.1:1883 (no storage; CPU = the mosquitto process), in alternating windows
// (Mosquitto first), --rounds times (3 unless more are asked for). Efficiency = Mosquitto's CPU per
// acknowledged message ÷ the service's (pooled); each round's ratio and their median are printed and kept
// in the JSON. Afterwards the rows stored are counted against every PUBACK the service sent.
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from '../lib/cpu.js';
import { runMqttLoad } from '../lib/mqtt-load.js';
import { startService } from '../lib/service.js';
import { mosquittoPid } from './mqtt-mosquitto.js';
import { MQTT_BENCH_ENV, publishScenario } from './mqtt-publish.js';

const CONNECTIONS = 16;
const INFLIGHT = 16;
const PAYLOAD = JSON.stringify([{ bn: 'urn:dev:bench:', n: 'temp', u: 'Cel', v: 21.5 }]);
const MOSQUITTO_PORT = 1883;

const median = (/** @type {number[]} */ xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? /** @type {number} */ (s[(s.length - 1) / 2]) : (/** @type {number} */ (s[s.length / 2 - 1]) + /** @type {number} */ (s[s.length / 2])) / 2;
};
const sum = (/** @type {Record<string, number>} */ o) => Object.values(o).reduce((a, b) => a + b, 0);

/**
 * One measured window of the generator against `port`; CPU of `roots`, plus PostgreSQL when a database is
 * named: every PostgreSQL process (the official figure) and, apart, that database's own (cpu.js postgresOwn).
 * @param {any} ctx @param {number} port @param {any[]} clients @param {Record<string, number>} roots @param {string | undefined} database
 */
async function window(ctx, port, clients, roots, database) {
  const includePostgres = database !== undefined;
  /** @type {any} */ let before = null;
  /** @type {any} */ let after = null;
  const load = await runMqttLoad({
    port, clients, payload: PAYLOAD, inflight: INFLIGHT, warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (pid) => { before = takeCpuSnapshot({ ...roots, generator: pid }, { includePostgres, postgresDatabase: database }); },
    onWindowEnd: (pid) => { after = takeCpuSnapshot({ ...roots, generator: pid }, { includePostgres, postgresDatabase: database }); },
  });
  if (!before || !after) throw new Error('mqtt load generator finished without reporting its window');
  const cpu = diffCpuSnapshots(before, after);
  const { generator = 0, postgresOwn, ...server } = cpu.cpuSeconds;
  const serverCpu = sum(server);
  const ownCpu = serverCpu - (server.postgres ?? 0) + (postgresOwn ?? 0);
  return {
    ...load, serverCpuSeconds: server, cpuPerMessageUs: (serverCpu / load.requests) * 1e6, ownCpuPerMessageUs: (ownCpu / load.requests) * 1e6,
    generatorCpuShare: generator / load.wallSeconds, otherCpuSeconds: cpu.otherCpuSeconds ?? null,
  };
}

export default {
  name: 'mqtt-qos1-16x16',
  description: 'MQTT 3.1.1 QoS 1, one SenML record, 16 connections × 16 in flight: service (PUBACK after commit, CPU incl. PostgreSQL) vs Mosquitto on 127.0.0.1:1883, alternating rounds',
  target: { efficiency: 0.8 },
  server: 'none',
  connections: CONNECTIONS,
  async run(/** @type {any} */ ctx) {
    const mosquitto = mosquittoPid();
    if (!mosquitto) throw new Error('no mosquitto process found (the reference listens on 127.0.0.1:1883)');
    const service = await startService({ env: MQTT_BENCH_ENV });
    try {
      const base = publishScenario('mqtt-qos1-16x16', INFLIGHT);
      const databaseName = new URL(service.databaseUrl).pathname.slice(1);
      const data = await base.setup({ ports: service.ports, databaseUrl: service.databaseUrl, connections: CONNECTIONS });
      const serviceClients = data.clients.map((/** @type {any} */ c, /** @type {number} */ i) => ({ ...c, clientId: `bench-${i}` }));
      const reference = Array.from({ length: CONNECTIONS }, (_, i) => ({ clientId: `bench-${process.pid}-${i}`, topic: `bench/${process.pid}/reference` }));
      const rounds = ctx.rounds > 1 ? ctx.rounds : 3;
      const rows = [];
      let acknowledged = 0;
      for (let r = 1; r <= rounds; r++) {
        const ref = await window(ctx, MOSQUITTO_PORT, reference, { mosquitto }, undefined);
        const own = await window(ctx, service.ports.mqtt, serviceClients, { service: service.pid }, databaseName);
        acknowledged += own.acknowledged;
        const ratio = ref.cpuPerMessageUs / own.cpuPerMessageUs;
        const ownRatio = ref.cpuPerMessageUs / own.ownCpuPerMessageUs;
        const processOnly = (own.serverCpuSeconds.service / own.requests) * 1e6;
        rows.push({ round: r, mosquitto: ref, service: own, ratio, ownRatio });
        console.error(`bench: mqtt-qos1-16x16 #${r}: mosquitto ${Math.round(ref.reqPerSec)} msg/s ${ref.cpuPerMessageUs.toFixed(1)} µs/msg (gen ${ref.generatorCpuShare.toFixed(2)}, other ${ref.otherCpuSeconds?.toFixed(2)} s); `
          + `service ${Math.round(own.reqPerSec)} msg/s ${own.cpuPerMessageUs.toFixed(1)} µs/msg (process ${processOnly.toFixed(1)}, pg ${(((own.serverCpuSeconds.postgres ?? 0) / own.requests) * 1e6).toFixed(1)}; gen ${own.generatorCpuShare.toFixed(2)}, other ${own.otherCpuSeconds?.toFixed(2)} s); ratio ${ratio.toFixed(3)}, with its own database's PostgreSQL only ${ownRatio.toFixed(3)} (${own.ownCpuPerMessageUs.toFixed(1)} µs/msg)`);
      }
      const sql = postgres(service.databaseUrl, { max: 1, onnotice: () => {} });
      let stored = 0;
      try {
        [{ n: stored }] = await sql`select count(*)::int as n from messages where channel_id = ${data.channelId}`;
      } finally {
        await sql.end();
      }
      const missing = Math.max(0, acknowledged - stored);
      if (missing > 0) console.error(`bench: mqtt-qos1-16x16: ${missing} acknowledged messages missing from storage`);
      const pool = (/** @type {'mosquitto' | 'service'} */ side) => {
        const cpu = rows.reduce((a, x) => a + sum(x[side].serverCpuSeconds), 0);
        const n = rows.reduce((a, x) => a + x[side].requests, 0);
        return (cpu / n) * 1e6;
      };
      const ratios = rows.map((x) => x.ratio);
      const ownRatios = rows.map((x) => x.ownRatio);
      console.error(`bench: mqtt-qos1-16x16 ratios ${ratios.map((x) => x.toFixed(3)).join(', ')}; median ${median(ratios).toFixed(3)}; `
        + `own-database ratios ${ownRatios.map((x) => x.toFixed(3)).join(', ')}; median ${median(ownRatios).toFixed(3)}; stored ${stored} of ${acknowledged} acknowledged`);
      const own = rows.map((x) => x.service);
      const middle = /** @type {any} */ (own[Math.floor(own.length / 2)]);
      const serverCpuSeconds = {};
      for (const o of own) for (const [k, v] of Object.entries(o.serverCpuSeconds)) /** @type {any} */ (serverCpuSeconds)[k] = (/** @type {any} */ (serverCpuSeconds)[k] ?? 0) + v;
      const requests = own.reduce((a, o) => a + o.requests, 0);
      const wallSeconds = own.reduce((a, o) => a + o.wallSeconds, 0);
      return {
        requests, wallSeconds, reqPerSec: requests / wallSeconds, p50Us: middle.p50Us, p99Us: Math.max(...own.map((o) => o.p99Us)), maxUs: Math.max(...own.map((o) => o.maxUs)),
        errors: own.reduce((a, o) => a + o.errors, 0) + missing, serverCpuSeconds, generatorCpuShare: middle.generatorCpuShare,
        otherCpuSeconds: own.reduce((a, o) => a + (o.otherCpuSeconds ?? 0), 0),
        baselineCpuPerRequestUs: pool('mosquitto'), ratios, ratioMedian: median(ratios), ownRatios, ownRatioMedian: median(ownRatios), acknowledged, stored, missing, rounds: rows,
      };
    } finally {
      await service.stop();
    }
  },
};
