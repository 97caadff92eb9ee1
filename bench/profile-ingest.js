// Profiles the service's HTTP publish path under ingest-http-1's load (issue 37.2): the service runs with
// --cpu-prof, the bench's own generator drives --connections keep-alive connections, one SenML record per
// request, and the profile (written when the service stops) is summarised by self time per function and
// per file over the measured window only (the window is saved beside it, window.json, for other views).
// Every run also prints CPU per message of the server process split into user and system time, its own
// database's PostgreSQL processes (backends, plus the shared WAL writer and checkpointer) and every
// PostgreSQL process of the machine (what bench/run.js counts): on a machine shared with other test
// suites the last one carries their work, the own-database figure does not.
//   --no-profile   no --cpu-prof (its sampling thread costs CPU): the figures only
//   --floor        the ingest floor (bench/lib/ingest-floor-server.js) instead of the service
//   --bare         the bare handler (bench/scenarios/bare.js) instead, for its user/system split
//   --entry <file> another build of the service, relative to the repository root (an older commit's
//                  worktree: ../<worktree>/dist/src/main.js), measured by this harness
// BENCH_SERVICE_NODE_ARGS (bench/lib/service.js) adds node options to the service or the floor.
// usage: node bench/profile-ingest.js [--duration 10] [--connections 64] [--dir /tmp/ingest-profile] [--no-profile] [--floor | --bare | --entry <file>]
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { printWindowTimes, windowTimes } from './lib/cpu-profile.js';
import { diffCpuSnapshots, takeCpuSnapshot } from './lib/cpu.js';
import { startBareServer } from './lib/bare-server.js';
import { startLoad } from './lib/load.js';
import { startService } from './lib/service.js';
import { FLOOR_ENTRY } from './lib/ingest-floor-server.js';
import floorScenario from './scenarios/ingest-floor.js';
import serviceScenario, { INGEST_BENCH_ENV } from './scenarios/ingest-http-1.js';

/** CPU ticks per thread name of a process (threads of one name summed: libuv's pool, V8's workers). */
function threadTicks(/** @type {number} */ pid) {
  const byName = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const [user, sys] = byName.get(name) ?? [0, 0];
      byName.set(name, [user + Number(fields[11]), sys + Number(fields[12])]);
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return byName;
}

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    dir: { type: 'string', default: '/tmp/ingest-profile' },
    'no-profile': { type: 'boolean', default: false },
    entry: { type: 'string' },
    bare: { type: 'boolean', default: false },
    floor: { type: 'boolean', default: false },
  },
});
const dir = values.dir;
const profiling = !values['no-profile'];
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const bare = values.bare;
const floor = values.floor;
const scenarioFile = fileURLToPath(new URL(bare ? './scenarios/bare.js' : floor ? './scenarios/ingest-floor.js' : './scenarios/ingest-http-1.js', import.meta.url));
const scenario = floor ? floorScenario : serviceScenario;
const nodeArgs = profiling ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
const service = bare
  ? Object.assign(await startBareServer(), { databaseUrl: 'postgres://none/none' })
  : await startService({ env: floor ? {} : INGEST_BENCH_ENV, entry: floor ? FLOOR_ENTRY : values.entry, nodeArgs });
const databaseName = new URL(service.databaseUrl).pathname.slice(1);
let load;
let cpu;
let stored;
let threadsBefore = new Map();
const threads = new Map();
const window = { start: 0, end: 0 };
try {
  const connections = Number(values.connections);
  const base = { scenario: 'ingest-profile', ports: service.ports, databaseUrl: service.databaseUrl, connections };
  const data = bare ? null : await scenario.setup(base);
  let before;
  const roots = (/** @type {number} */ pid) => ({ service: service.pid, generator: pid });
  const opts = { includePostgres: true, postgresDatabase: databaseName };
  const { done } = startLoad({
    scenarioFile, ctx: { ...base, data }, connections, warmupSeconds: 2, durationSeconds: Number(values.duration),
    // V8 stamps samples with the monotonic clock process.hrtime reads (one clock for every process here).
    onWindowStart: (pid) => {
      window.start = Number(process.hrtime.bigint() / 1000n);
      before = takeCpuSnapshot(roots(pid), opts);
      threadsBefore = threadTicks(service.pid);
    },
    onWindowEnd: (pid) => {
      window.end = Number(process.hrtime.bigint() / 1000n);
      cpu = diffCpuSnapshots(before, takeCpuSnapshot(roots(pid), opts));
      for (const [name, [user, sys]] of threadTicks(service.pid)) {
        const [u0, s0] = threadsBefore.get(name) ?? [0, 0];
        threads.set(name, [user - u0, sys - s0]);
      }
    },
  });
  load = await done;
  stored = bare ? { stored: 0, acknowledgedRecords: 0, rowsPerCommit: 0 } : await scenario.teardown({ ...base, data }, load);
} finally {
  await service.stop();
}
const n = load.requests;
const us = (/** @type {number} */ s) => ((s * 1e6) / n).toFixed(2);
console.log(`${Math.round(load.reqPerSec)} req/s, ${n} in the window, errors ${load.errors}; stored ${stored.stored} of ${stored.acknowledgedRecords} acknowledged, ${stored.rowsPerCommit.toFixed(1)} rows per commit`);
console.log(`cpu µs/msg: service ${us(cpu.cpuSeconds.service)}, own database's PostgreSQL ${us(cpu.cpuSeconds.postgresOwn ?? 0)}, every PostgreSQL ${us(cpu.cpuSeconds.postgres)}, generator ${us(cpu.cpuSeconds.generator)}`);
console.log(`service threads, µs/msg user + system: ${[...threads].filter(([, [u, k]]) => u + k > 0).map(([name, [u, k]]) => `${name} ${us(u / 100)} + ${us(k / 100)}`).join(', ')}`);
if (!profiling || bare) process.exit(0);
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no profile written');
const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
// For a later look at the same window (inclusive times, callers): the window and the message count.
writeFileSync(join(dir, 'window.json'), JSON.stringify({ ...window, messages: n }));
const times = windowTimes(profile, window);
console.log(`profile ${file}: ${(times.total / 1e6).toFixed(2)} s sampled (the main thread, idle included)`);
printWindowTimes(times, n, 30, 50);
