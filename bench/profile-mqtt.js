// Profiles the service's MQTT broker under issue 37's load: the service runs with --cpu-prof, the raw
// generator (lib/mqtt-load.js) drives 16 connections × 16 QoS 1 PUBLISHes for --duration seconds, and the
// profile (written when the service stops) is summarised by self time per function and per file.
// usage: node bench/profile-mqtt.js [--duration 10] [--dir /tmp/mqtt-profile]
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runMqttLoad } from './lib/mqtt-load.js';
import { startService } from './lib/service.js';
import { MQTT_BENCH_ENV, publishScenario } from './scenarios/mqtt-publish.js';

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, dir: { type: 'string', default: '/tmp/mqtt-profile' } } });
const dir = values.dir;
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const service = await startService({ env: MQTT_BENCH_ENV, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`] });
let load;
const window = { start: 0, end: 0 };
try {
  const data = await publishScenario('mqtt-profile', 16).setup({ ports: service.ports, databaseUrl: service.databaseUrl, connections: 16 });
  load = await runMqttLoad({
    port: service.ports.mqtt, clients: data.clients.map((c, i) => ({ ...c, clientId: `p-${i}` })), inflight: 16,
    payload: JSON.stringify([{ bn: 'urn:dev:bench:', n: 'temp', u: 'Cel', v: 21.5 }]), warmupSeconds: 1, durationSeconds: Number(values.duration),
        // V8 stamps samples with the monotonic clock process.hrtime reads (one clock for every process here).
    onWindowStart: () => { window.start = Number(process.hrtime.bigint() / 1000n); },
    onWindowEnd: () => { window.end = Number(process.hrtime.bigint() / 1000n); },
  });
} finally {
  await service.stop();
}
console.log(`${Math.round(load.reqPerSec)} msg/s, ${load.acknowledged} acknowledged`);
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no profile written');
const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
const self = new Map();
const byFile = new Map();
const dt = new Map();
// Only the measured window: start-up, set-up and shutdown are left out.
let at = profile.startTime;
for (let i = 0; i < profile.samples.length; i++) {
  const delta = profile.timeDeltas[i] ?? 0;
  at += delta;
  if (at >= window.start && at <= window.end) dt.set(profile.samples[i], (dt.get(profile.samples[i]) ?? 0) + delta);
}
let total = 0;
for (const node of profile.nodes) {
  const us = dt.get(node.id) ?? 0;
  total += us;
  const cf = node.callFrame;
  const where = cf.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/');
  const key = `${cf.functionName || '(anon)'} ${where}:${cf.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + us);
  const f = where.split(':')[0] || cf.functionName;
  byFile.set(f, (byFile.get(f) ?? 0) + us);
}
const per = (us) => `${(us / load.requests).toFixed(2)} µs/msg ${((us / total) * 100).toFixed(1)}%`;
console.log(`profile ${file}: ${(total / 1e6).toFixed(2)} s sampled`);
console.log('--- by file');
for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${per(v).padEnd(26)} ${k}`);
console.log('--- by function');
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 45)) console.log(`${per(v).padEnd(26)} ${k}`);
