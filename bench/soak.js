// Soak (issue 35 point 4): two instances of the service on one fresh database under a fixed, moderate mix
// of every kind of request for --minutes (default 30), one PostgreSQL backend of that database terminated
// per minute. Per --slice minutes (default 5): per operation the completed count, error rate and p99; RSS
// (/proc/<pid>/status VmRSS) and V8 heap used (nodejs_heap_size_used_bytes from each instance's /metrics)
// of both instances; CPU per operation (both instances' process trees plus the database's PostgreSQL
// backends, from /proc as lib/cpu.js reads it). At the end every acknowledged message (by sequence number)
// and certificate (by credential id, EST by serial) is looked up in the database, and CPU
// per operation over the last 10 minutes is judged against the first 10 minutes (within 10%). Prints a table
// and writes results/soak.json.
//   node bench/soak.js [--minutes 30] [--slice 5] [--warmup 60] [--idle 30]
//   node bench/soak.js --report results/soak.json   (judges and prints a saved run again)
import { execFileSync } from 'node:child_process';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import hdr from 'hdr-histogram-js';
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from './lib/cpu.js';
import { resultsDir } from './lib/paths.js';
import { pkiEnv } from './lib/pki-fixture.js';
import { createDatabase, dropDatabase, startService, stopAllServices } from './lib/service.js';
import { createOperations } from './lib/soak-ops.js';
import { buildWorld } from './lib/soak-world.js';
import { adminSession } from './scenarios/auth-whoami-anon.js';

const arg = (/** @type {string} */ name, /** @type {number} */ fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const MINUTES = arg('minutes', 30);
const SLICE_MINUTES = arg('slice', 5);
/** The same load before slice 0, reported apart and not judged: JIT, caches and pools settle in it. */
const WARMUP_SECONDS = arg('warmup', 60);
/** A window without load before the warm-up and after the load: the instances' background CPU (timers, relay, LISTEN), which grows if a periodic job scans what grows. */
const IDLE_SECONDS = arg('idle', 30);
const KILL_EVERY_MS = 60_000;
const MAX_IN_FLIGHT = 64;
const CPU_TOLERANCE = 0.1;
/**
 * The CPU verdict compares the first and the last JUDGE_WINDOW_MINUTES of the run, not one slice with
 * another: on this kind of shared virtual machine two quiet 5-minute slices of one constant load differ by
 * up to 13% (1,486-1,944 µs per request in one run, load average under 1), the host's noise, which a
 * window of two slices halves. The first-slice/last-slice ratio is printed beside it.
 */
const JUDGE_WINDOW_MINUTES = 10;

/** Requests per second per operation, split evenly over the two instances: far below saturation. */
const RATES = {
  'http-publish': 20, 'mqtt-publish': 20, 'coap-publish': 10, 'authz-check': 20, 'graphql-read': 10, 'graphql-write': 5,
  'custom-endpoint': 10, 'cert-issue': 3, 'cert-renew': 2, ocsp: 10, 'est-simpleenroll': 1,
};

const ssl = (/** @type {string[]} */ args) => execFileSync('openssl', args, { stdio: 'pipe' });
const histogram = () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 });
const log = (/** @type {string} */ line) => console.error(`soak ${new Date().toISOString().slice(11, 19)} ${line}`);

function newSlice(/** @type {number} */ index) {
  return {
    index, startedAt: new Date().toISOString(),
    /** The longest gap between two ticks of the 20 ms ticker: a stall of the load generator itself. */
    maxTickGapMs: 0,
    ops: Object.fromEntries(Object.keys(RATES).map((op) => [op, { done: 0, errors: 0, classes: /** @type {Record<string, number>} */ ({}), hist: histogram() }])),
  };
}

/** VmRSS of a process in bytes (its worker threads share it). */
function readRss(/** @type {number} */ pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : null;
}

/** One value of an instance's /metrics (prom-client default metrics). */
async function scrape(/** @type {number} */ port, /** @type {string} */ name) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = new RegExp(`^${name} ([0-9.e+]+)`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

/** Each instance's whole log goes to results/soak-instance-<n>.log; warn and error lines are counted by message. */
const logFile = (/** @type {number} */ i) => path.join(resultsDir, `soak-instance-${i}.log`);
/** @type {{byLevel: Record<string, number>, messages: Record<string, number>}[]} */
const logCounts = [];
function logSink(/** @type {number} */ i) {
  writeFileSync(logFile(i), '');
  const counts = { byLevel: /** @type {Record<string, number>} */ ({}), messages: /** @type {Record<string, number>} */ ({}) };
  logCounts[i] = counts;
  return (/** @type {string} */ line) => {
    appendFileSync(logFile(i), `${line}\n`);
    let level = 'stderr';
    let msg = line.slice(0, 120);
    if (line.startsWith('{')) {
      try {
        const entry = JSON.parse(line);
        level = String(entry.level ?? 'unknown');
        msg = `${entry.msg}${entry.err?.message ? `: ${String(entry.err.message).slice(0, 100)}` : entry.error ? `: ${String(entry.error).slice(0, 100)}` : ''}`;
      } catch { /* not JSON: counted as stderr-like text */ }
    }
    counts.byLevel[level] = (counts.byLevel[level] ?? 0) + 1;
    if (/warn|error|fatal|stderr|40|50|60/.test(level)) counts.messages[`${level}: ${msg}`] = (counts.messages[`${level}: ${msg}`] ?? 0) + 1;
  };
}

async function main() {
  const env = pkiEnv('encrypted_database');
  const caDir = path.dirname(env.SVC_PKI_ROOT_CERT_PATH);
  const f = (/** @type {string} */ n) => path.join(caDir, n);
  ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('listener.key'), '-out', f('listener.pem'),
    '-subj', '/CN=soak enrollment', '-days', '2', '-addext', 'subjectAltName=IP:127.0.0.1']);
  const serviceEnv = {
    ...env, SVC_MQTT_ADDR: '127.0.0.1:0', SVC_COAP_ADDR: '127.0.0.1:0',
    SVC_PKI_ENROLLMENT_ENABLED: 'true', SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0',
    SVC_PKI_ENROLLMENT_TLS_CERT_PATH: f('listener.pem'), SVC_PKI_ENROLLMENT_TLS_KEY_PATH: f('listener.key'),
    // Devices enroll once a second between them for the whole run: above the per-entity default of 10 a minute.
    SVC_PKI_ENROLLMENT_ENTITY_RATE_LIMIT: '100000', SVC_PKI_ENROLLMENT_MAX_CONNECTIONS_PER_IP: '256',
  };
  const database = await createDatabase();
  const databaseName = new URL(database.url).pathname.slice(1);
  const killer = postgres(process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {}, connection: { application_name: 'soak-killer' } });
  const startedAt = new Date();
  const load = { start: loadavg() };
  let result;
  try {
    // One after the other: the first applies the migrations.
    const a = await startService({ env: serviceEnv, databaseUrl: database.url, onLine: logSink(0) });
    const b = await startService({ env: serviceEnv, databaseUrl: database.url, onLine: logSink(1) });
    const instances = [a, b].map((s) => ({ pid: s.pid, ports: s.ports, token: '' }));
    for (const inst of instances) inst.token = await adminSession(inst.ports.http);
    log(`instances ${a.pid} and ${b.pid} on ${databaseName}; building the world`);
    const world = await buildWorld({ http: a.ports.http, databaseUrl: database.url, caDir });
    const acknowledged = { messages: { http: /** @type {number[]} */ ([]), mqtt: /** @type {number[]} */ ([]), coap: /** @type {number[]} */ ([]) }, credentials: /** @type {string[]} */ ([]), estSerials: /** @type {string[]} */ ([]) };
    /** @type {any[]} */
    const events = [];
    const { ops, close } = await createOperations({ instances, world, caDir, acknowledged, listenerCert: f('listener.pem'), events });
    result = { ...(await soak({ instances, ops, databaseName, killer })), events, logs: logCounts.map((c, i) => ({ file: logFile(i), byLevel: c.byLevel, warnings: c.messages })) };
    log('load stopped; closing clients and checking storage');
    await close();
    const stored = await checkStored(database.url, world, acknowledged);
    const restarts = { a: a.countLogLines(), b: b.countLogLines() };
    const exits = { a: await a.stop(), b: await b.stop() };
    result = { ...result, stored, logLinesAfterReady: restarts, exits };
  } finally {
    await stopAllServices();
    await killer.end();
    await dropDatabase(databaseName);
  }
  load.end = loadavg();
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const out = { scenario: 'soak', commit, node: process.version, startedAt: startedAt.toISOString(), minutes: MINUTES, sliceMinutes: SLICE_MINUTES, warmupSeconds: WARMUP_SECONDS, rates: RATES, loadAverage: load, ...result };
  writeFileSync(path.join(resultsDir, 'soak.json'), JSON.stringify(out, null, 2));
  printReport(out);
  const failed = out.stored.missingTotal > 0 || !out.cpuVerdict.met;
  process.exitCode = failed ? 1 : 0;
}

/**
 * The load: a 20 ms ticker launches what each operation's rate owes; at MAX_IN_FLIGHT of one operation
 * the request is not sent and counts as an error ("backlog"), so a stall shows instead of queueing.
 * @param {{instances: {pid: number, ports: Record<string, number>}[], ops: Record<string, (seq: number) => Promise<void>>, databaseName: string, killer: any}} opts
 */
async function soak({ instances, ops, databaseName, killer }) {
  const roots = Object.fromEntries(instances.map((inst, i) => [`instance${i}`, inst.pid]));
  const idleBefore = await idleWindow(roots, databaseName);
  const snap = () => ({ own: takeCpuSnapshot(roots, { postgresBackendsOf: databaseName }), all: takeCpuSnapshot({}, { includePostgres: true }), machineLoad: loadavg()[0] });
  const sliceMs = SLICE_MINUTES * 60_000;
  const warmupMs = WARMUP_SECONDS * 1000;
  const endAt = Date.now() + warmupMs + MINUTES * 60_000;
  const t0 = Date.now();
  const launched = Object.fromEntries(Object.keys(RATES).map((op) => [op, 0]));
  const inFlight = Object.fromEntries(Object.keys(RATES).map((op) => [op, 0]));
  /** @type {any[]} */
  const slices = [];
  /** @type {any[]} */
  const kills = [];
  /** @type {{at: string, op: string, instance: number, error: string}[]} */
  const errorLog = [];
  let slice = newSlice(warmupMs > 0 ? -1 : 0);
  let generatorUsage = process.cpuUsage();
  let sliceSnap = snap();
  let sliceStart = Date.now();
  const finishSlice = async () => {
    // Swapped at once: what completes from here on belongs to the next slice.
    const end = snap();
    const ended = slice;
    const begin = sliceSnap;
    sliceSnap = end;
    sliceStart = Date.now();
    slice = newSlice(ended.index + 1);
    const generator = process.cpuUsage(generatorUsage);
    generatorUsage = process.cpuUsage();
    const cpu = diffCpuSnapshots(begin.own, end.own);
    const pgAll = diffCpuSnapshots(begin.all, end.all).cpuSeconds.postgres ?? 0;
    const done = Object.values(ended.ops).reduce((n, o) => n + o.done, 0);
    const memory = await Promise.all(instances.map(async (inst) => ({
      pid: inst.pid, rssBytes: readRss(inst.pid), heapUsedBytes: await scrape(inst.ports.http, 'nodejs_heap_size_used_bytes').catch(() => null),
    })));
    const instanceCpu = instances.reduce((s, _, i) => s + (cpu.cpuSeconds[`instance${i}`] ?? 0), 0);
    const ownPg = cpu.cpuSeconds.postgres ?? 0;
    const row = {
      index: ended.index, startedAt: ended.startedAt, wallSeconds: cpu.wallSeconds, loadAverage1m: end.machineLoad,
      operations: Object.fromEntries(Object.entries(ended.ops).map(([op, o]) => [op, {
        done: o.done, errors: o.errors, errorRate: o.done + o.errors ? o.errors / (o.done + o.errors) : 0, p50Us: o.hist.getValueAtPercentile(50),
        p99Us: o.hist.getValueAtPercentile(99), maxUs: o.hist.maxValue, errorClasses: o.classes,
      }])),
      completed: done, generatorMaxStallMs: Math.round(ended.maxTickGapMs),
      cpu: {
        instancesSeconds: instanceCpu, ownPostgresSeconds: ownPg, allPostgresSeconds: pgAll, otherSeconds: cpu.otherCpuSeconds, loadGeneratorSeconds: (generator.user + generator.system) / 1e6,
        perOperationUs: ((instanceCpu + ownPg) / Math.max(1, done)) * 1e6, instancesPerOperationUs: (instanceCpu / Math.max(1, done)) * 1e6,
        withAllPostgresPerOperationUs: ((instanceCpu + pgAll) / Math.max(1, done)) * 1e6,
      },
      memory,
    };
    slices.push(row);
    log(`${row.index < 0 ? 'warm-up' : `slice ${row.index}`}: ${done} ops, ${Object.values(row.operations).reduce((n, o) => n + o.errors, 0)} errors, ${row.cpu.perOperationUs.toFixed(0)} µs CPU/op, `
      + `RSS ${memory.map((m) => `${((m.rssBytes ?? 0) / 2 ** 20).toFixed(0)}`).join('/')} MiB, heap ${memory.map((m) => `${((m.heapUsedBytes ?? 0) / 2 ** 20).toFixed(0)}`).join('/')} MiB, load ${end.machineLoad.toFixed(1)}`);
  };

  /** @type {Set<Promise<void>>} */
  const running = new Set();
  const launch = (/** @type {string} */ op, /** @type {number} */ seq) => {
    const started = process.hrtime.bigint();
    inFlight[op]++;
    const p = /** @type {(seq: number) => Promise<void>} */ (ops[op])(seq).then(
      () => {
        const o = slice.ops[op];
        o.done++;
        o.hist.recordValue(Math.max(1, Number(process.hrtime.bigint() - started) / 1000));
      },
      (err) => {
        const o = slice.ops[op];
        o.errors++;
        const cls = String(err?.message ?? err).slice(0, 120);
        o.classes[cls] = (o.classes[cls] ?? 0) + 1;
        if (errorLog.length < 5000) errorLog.push({ at: new Date().toISOString(), op, instance: seq % instances.length, error: cls });
      },
    ).finally(() => {
      inFlight[op]--;
      running.delete(p);
    });
    running.add(p);
  };

  const killTimer = setInterval(async () => {
    try {
      const [victim] = await killer`select pid, application_name, state, left(query, 60) as query from pg_stat_activity
        where datname = ${databaseName} and backend_type = 'client backend' and pid <> pg_backend_pid() order by random() limit 1`;
      if (!victim) return;
      const [{ ok }] = await killer`select pg_terminate_backend(${victim.pid}) as ok`;
      kills.push({ at: new Date().toISOString(), pid: victim.pid, applicationName: victim.application_name, state: victim.state, query: victim.query, terminated: ok });
      log(`terminated backend ${victim.pid} (${victim.application_name || 'no application_name'}, ${victim.state})`);
    } catch (err) {
      kills.push({ at: new Date().toISOString(), error: String(/** @type {Error} */ (err).message) });
    }
  }, KILL_EVERY_MS);

  await new Promise((resolve) => {
    let lastTick = Date.now();
    const tick = setInterval(() => {
      const now = Date.now();
      slice.maxTickGapMs = Math.max(slice.maxTickGapMs, now - lastTick);
      lastTick = now;
      if (now >= endAt) {
        clearInterval(tick);
        return resolve(undefined);
      }
      for (const [op, rate] of Object.entries(RATES)) {
        const owed = Math.floor(((now - t0) / 1000) * rate);
        while (launched[op] < owed) {
          const seq = launched[op]++;
          if (inFlight[op] >= MAX_IN_FLIGHT) {
            const o = slice.ops[op];
            o.errors++;
            o.classes.backlog = (o.classes.backlog ?? 0) + 1;
            if (errorLog.length < 5000) errorLog.push({ at: new Date(now).toISOString(), op, instance: seq % instances.length, error: 'backlog' });
          } else launch(op, seq);
        }
      }
      if (now - sliceStart >= (slice.index < 0 ? warmupMs : sliceMs)) finishSlice().catch((err) => log(`slice failed: ${err.message}`));
    }, 20);
  });
  clearInterval(killTimer);
  // What was sent in the last slice is awaited (bounded by the requests' own deadlines) and counted in it.
  await Promise.allSettled([...running]);
  if (slice.ops && Object.values(slice.ops).some((o) => o.done + o.errors > 0)) await finishSlice();
  const idleAfter = await idleWindow(roots, databaseName);
  const measured = slices.filter((s) => s.index >= 0);
  for (const s of measured) s.cpu.netOfIdlePerOperationUs = ((s.cpu.instancesSeconds + s.cpu.ownPostgresSeconds - idleBefore.cores * s.wallSeconds) / Math.max(1, s.completed)) * 1e6;
  return { errorLog, idle: { before: idleBefore, after: idleAfter }, warmup: slices.find((s) => s.index < 0) ?? null, slices: measured, kills, launched, cpuVerdict: judgeCpu(measured), memoryTrend: memoryTrend(measured) };
}

/** CPU of the instances and the database's backends over IDLE_SECONDS without load. */
async function idleWindow(/** @type {Record<string, number>} */ roots, /** @type {string} */ databaseName) {
  if (IDLE_SECONDS <= 0) return { wallSeconds: 0, instancesSeconds: 0, ownPostgresSeconds: 0, cores: 0 };
  const before = takeCpuSnapshot(roots, { postgresBackendsOf: databaseName });
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const cpu = diffCpuSnapshots(before, takeCpuSnapshot(roots, { postgresBackendsOf: databaseName }));
  const instancesSeconds = Object.keys(roots).reduce((s, k) => s + (cpu.cpuSeconds[k] ?? 0), 0);
  const ownPostgresSeconds = cpu.cpuSeconds.postgres ?? 0;
  log(`idle: ${((instancesSeconds + ownPostgresSeconds) / cpu.wallSeconds).toFixed(3)} cores (instances ${instancesSeconds.toFixed(2)} s, backends ${ownPostgresSeconds.toFixed(2)} s in ${cpu.wallSeconds.toFixed(0)} s)`);
  return { wallSeconds: cpu.wallSeconds, instancesSeconds, ownPostgresSeconds, cores: (instancesSeconds + ownPostgresSeconds) / cpu.wallSeconds };
}

/** CPU per operation over the first and the last JUDGE_WINDOW_MINUTES of full slices, and slice by slice. */
function judgeCpu(/** @type {any[]} */ slices, /** @type {number} */ sliceMinutes = SLICE_MINUTES) {
  const full = slices.filter((s) => s.wallSeconds >= sliceMinutes * 60 * 0.9);
  const first = full[0];
  const last = full[full.length - 1];
  if (!first || !last || first === last) return { met: false, reason: 'fewer than two full slices' };
  const perWindow = Math.max(1, Math.min(Math.round(JUDGE_WINDOW_MINUTES / sliceMinutes), Math.floor(full.length / 2)));
  /** Seconds of CPU over requests completed across a window's slices (each slice weighs as its requests). */
  const windowUs = (/** @type {any[]} */ window, /** @type {string} */ key) =>
    (window.reduce((sum, s) => sum + s.cpu[key] * s.completed, 0) / Math.max(1, window.reduce((n, s) => n + s.completed, 0)));
  const head = full.slice(0, perWindow);
  const tail = full.slice(-perWindow);
  const ratio = windowUs(tail, 'perOperationUs') / windowUs(head, 'perOperationUs');
  const processRatio = windowUs(tail, 'instancesPerOperationUs') / windowUs(head, 'instancesPerOperationUs');
  const netRatio = last.cpu.netOfIdlePerOperationUs !== undefined ? windowUs(tail, 'netOfIdlePerOperationUs') / windowUs(head, 'netOfIdlePerOperationUs') : null;
  const sliceRatio = last.cpu.perOperationUs / first.cpu.perOperationUs;
  // Beside the verdict: the spread of every full slice and the least-squares trend (µs per op per hour),
  // which tell a machine's noise (up and down) from a cost that grows with the run.
  const values = full.map((s) => s.cpu.perOperationUs);
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const xs = full.map((s) => (Date.parse(s.startedAt) - Date.parse(first.startedAt)) / 3_600_000);
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const den = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  const trendUsPerHour = den ? xs.reduce((a, x, i) => a + (x - mx) * (/** @type {number} */ (values[i]) - mean), 0) / den : 0;
  return {
    windowMinutes: perWindow * sliceMinutes, firstUs: windowUs(head, 'perOperationUs'), lastUs: windowUs(tail, 'perOperationUs'), ratio, processRatio, netRatio, sliceRatio,
    met: Math.abs(ratio - 1) <= CPU_TOLERANCE,
    minUs: Math.min(...values), maxUs: Math.max(...values), meanUs: mean, trendUsPerHour, trendShareOfMeanPerHour: trendUsPerHour / mean,
  };
}

/** Least-squares slope of RSS and heap per instance over the slices, in MiB per hour. */
function memoryTrend(/** @type {any[]} */ slices) {
  const slope = (/** @type {number[]} */ ys, /** @type {number[]} */ xs) => {
    const n = ys.length;
    if (n < 2) return null;
    const mx = xs.reduce((a, b) => a + b, 0) / n;
    const my = ys.reduce((a, b) => a + b, 0) / n;
    const num = xs.reduce((s, x, i) => s + (x - mx) * (/** @type {number} */ (ys[i]) - my), 0);
    const den = xs.reduce((s, x) => s + (x - mx) ** 2, 0);
    return den ? num / den : null;
  };
  const hours = slices.map((s) => (Date.parse(s.startedAt) - Date.parse(slices[0].startedAt)) / 3_600_000 + s.wallSeconds / 3600);
  const mib = (/** @type {number | null} */ v) => (v ?? 0) / 2 ** 20;
  return slices[0]?.memory.map((/** @type {any} */ _, /** @type {number} */ i) => ({
    instance: i,
    rssMiB: slices.map((s) => Math.round(mib(s.memory[i].rssBytes))),
    heapMiB: slices.map((s) => Math.round(mib(s.memory[i].heapUsedBytes))),
    rssMiBPerHour: slope(slices.map((s) => mib(s.memory[i].rssBytes)), hours),
    heapMiBPerHour: slope(slices.map((s) => mib(s.memory[i].heapUsedBytes)), hours),
  })) ?? [];
}

/** Every acknowledged message and certificate, looked up by its id. */
async function checkStored(/** @type {string} */ url, /** @type {any} */ world, /** @type {any} */ acknowledged) {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    /** @type {Record<string, {acknowledged: number, stored: number, missing: number}>} */
    const out = {};
    for (const protocol of /** @type {const} */ (['http', 'mqtt', 'coap'])) {
      const rows = await sql`select distinct value from messages where channel_id = ${world.channels[protocol]}`;
      const have = new Set(rows.map((r) => r.value));
      const acked = acknowledged.messages[protocol];
      out[`${protocol} messages`] = { acknowledged: acked.length, stored: have.size, missing: acked.filter((/** @type {number} */ v) => !have.has(v)).length };
    }
    const ids = acknowledged.credentials;
    const [found] = await sql`select count(*)::int as n from credentials where kind = 'certificate' and id = any(${ids}::uuid[])`;
    out['certificates (GraphQL issue + renew)'] = { acknowledged: ids.length, stored: found.n, missing: ids.length - found.n };
    const serials = await sql`select identifier from credentials where kind = 'certificate' and entity_id = any(${world.devices.map((/** @type {any} */ d) => d.id)}::uuid[])`;
    const norm = (/** @type {string} */ s) => s.toLowerCase().replace(/^0+/, '');
    const haveSerials = new Set(serials.map((r) => norm(r.identifier)));
    const est = acknowledged.estSerials;
    out['certificates (EST simpleenroll)'] = { acknowledged: est.length, stored: est.filter((/** @type {string} */ s) => haveSerials.has(norm(s))).length, missing: est.filter((/** @type {string} */ s) => !haveSerials.has(norm(s))).length };
    const missingTotal = Object.values(out).reduce((n, r) => n + r.missing, 0);
    return { ...out, missingTotal };
  } finally {
    await sql.end();
  }
}

function printReport(/** @type {any} */ out) {
  const ops = Object.keys(RATES);
  const ms = (/** @type {number} */ us) => (us / 1000).toFixed(us < 10_000 ? 1 : 0);
  console.log(`\nsoak: ${out.minutes} min, slices of ${out.sliceMinutes} min, commit ${out.commit}, load average ${out.loadAverage.start.map((/** @type {number} */ l) => l.toFixed(1)).join(' ')} → ${out.loadAverage.end.map((/** @type {number} */ l) => l.toFixed(1)).join(' ')}`);
  console.log(`\nerror rate % / p99 ms per operation and slice (rate/s in brackets)`);
  console.log(['operation'.padEnd(22), ...out.slices.map((/** @type {any} */ s) => `slice ${s.index}`.padStart(16))].join(''));
  for (const op of ops) {
    console.log([`${op} (${RATES[/** @type {keyof typeof RATES} */ (op)]})`.padEnd(22), ...out.slices.map((/** @type {any} */ s) => {
      const o = s.operations[op];
      return `${(o.errorRate * 100).toFixed(2)} / ${ms(o.p99Us)}`.padStart(16);
    })].join(''));
  }
  const line = (/** @type {string} */ label, /** @type {(s: any) => string} */ fn) => console.log([label.padEnd(22), ...out.slices.map((/** @type {any} */ s) => fn(s).padStart(16))].join(''));
  line('completed ops', (s) => String(s.completed));
  line('CPU µs/op (+own pg)', (s) => s.cpu.perOperationUs.toFixed(0));
  line('CPU µs/op instances', (s) => s.cpu.instancesPerOperationUs.toFixed(0));
  line('CPU µs/op net of idle', (s) => s.cpu.netOfIdlePerOperationUs.toFixed(0));
  line('CPU µs/op (+all pg)', (s) => s.cpu.withAllPostgresPerOperationUs.toFixed(0));
  line('load generator CPU s', (s) => s.cpu.loadGeneratorSeconds.toFixed(0));
  line('generator stall ms', (s) => String(s.generatorMaxStallMs));
  line('other CPU s', (s) => s.cpu.otherSeconds.toFixed(0));
  line('load avg 1m', (s) => s.loadAverage1m.toFixed(1));
  for (let i = 0; i < (out.slices[0]?.memory.length ?? 0); i++) {
    line(`RSS MiB instance ${i}`, (s) => ((s.memory[i].rssBytes ?? 0) / 2 ** 20).toFixed(0));
    line(`heap MiB instance ${i}`, (s) => ((s.memory[i].heapUsedBytes ?? 0) / 2 ** 20).toFixed(0));
  }
  const classes = {};
  for (const s of [...(out.warmup ? [out.warmup] : []), ...out.slices]) for (const [op, o] of Object.entries(s.operations)) for (const [c, n] of Object.entries(/** @type {any} */ (o).errorClasses)) {
    const k = `${op}: ${c}`;
    /** @type {any} */ (classes)[k] = (/** @type {any} */ (classes)[k] ?? 0) + n;
  }
  console.log(`\nerror classes, warm-up included (${out.warmup ? Object.values(out.warmup.operations).reduce((n, o) => n + /** @type {any} */ (o).errors, 0) : 0} errors in the warm-up): ${Object.keys(classes).length ? '' : 'none'}`);
  for (const [k, n] of Object.entries(classes)) console.log(`  ${k}: ${n}`);
  // When errors came: per 10 s, the count, beside the backend kills.
  const buckets = {};
  for (const e of out.errorLog) { const k = e.at.slice(11, 18) + '0'; /** @type {any} */ (buckets)[k] = (/** @type {any} */ (buckets)[k] ?? 0) + 1; }
  console.log(`errors per 10 s: ${Object.entries(buckets).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  console.log(`MQTT connection events: ${out.events.length ? out.events.map((/** @type {any} */ e) => `${e.at.slice(11, 19)} ${e.what} (instance ${e.instance})`).slice(0, 20).join('; ') : 'none'}`);
  for (const [i, l] of out.logs.entries()) {
    console.log(`instance ${i} log (${l.file}): lines by level ${JSON.stringify(l.byLevel)}`);
    for (const [m, n] of Object.entries(l.warnings).sort((x, y) => /** @type {number} */ (y[1]) - /** @type {number} */ (x[1])).slice(0, 12)) console.log(`  ${n} × ${m}`);
  }
  console.log(`\nbackends terminated: ${out.kills.filter((/** @type {any} */ k) => k.terminated).length} (${out.kills.map((/** @type {any} */ k) => `${k.at?.slice(11, 19)} ${k.applicationName || '?'}`).join(', ')})`);
  console.log('\nstored (looked up by id):');
  for (const [k, v] of Object.entries(out.stored)) if (k !== 'missingTotal') console.log(`  ${k}: ${/** @type {any} */ (v).acknowledged} acknowledged, ${/** @type {any} */ (v).missing} missing`);
  console.log(`\nmemory trend (least squares over slices, MiB/hour): ${out.memoryTrend.map((/** @type {any} */ m) => `instance ${m.instance}: RSS ${m.rssMiBPerHour?.toFixed(1)}, heap ${m.heapMiBPerHour?.toFixed(1)}`).join('; ')}`);
  console.log(`idle CPU (instances + backends, no load): ${out.idle.before.cores.toFixed(3)} cores before the load, ${out.idle.after.cores.toFixed(3)} after`);
  const v = out.cpuVerdict;
  console.log(v.ratio ? `CPU per operation, last ${v.windowMinutes} min / first ${v.windowMinutes} min: ${v.ratio.toFixed(3)} (instances alone ${v.processRatio.toFixed(3)}, `
    + `net of idle ${v.netRatio?.toFixed(3) ?? 'n/a'}): ${v.met ? 'within' : 'NOT within'} 10%; last slice / first ${v.sliceRatio.toFixed(3)}; `
    + `every full slice ${v.minUs.toFixed(0)}-${v.maxUs.toFixed(0)} µs (mean ${v.meanUs.toFixed(0)}), trend ${v.trendUsPerHour >= 0 ? '+' : ''}${v.trendUsPerHour.toFixed(0)} µs/op per hour (${(v.trendShareOfMeanPerHour * 100).toFixed(1)}% of the mean)` : `CPU verdict: ${v.reason}`);
}

if (process.argv.includes('--report')) {
  const out = JSON.parse(readFileSync(/** @type {string} */ (process.argv[process.argv.indexOf('--report') + 1]), 'utf8'));
  out.cpuVerdict = judgeCpu(out.slices, out.sliceMinutes);
  printReport(out);
} else main().catch(async (err) => {
  console.error(err);
  await stopAllServices();
  process.exit(1);
});
