// Profiles the service's MQTT broker under issue 37's load: the service runs with --cpu-prof, the raw
// generator (lib/mqtt-load.js) drives 16 connections × 16 QoS 1 PUBLISHes for --duration seconds, and the
// profile (written when the service stops) is summarised by self time per function and per file.
// usage: node bench/profile-mqtt.js [--duration 10] [--dir /tmp/mqtt-profile]
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { printWindowTimes, windowTimes } from './lib/cpu-profile.js';
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
const times = windowTimes(profile, window);
console.log(`profile ${file}: ${(times.total / 1e6).toFixed(2)} s sampled`);
printWindowTimes(times, load.requests, 30, 45);
