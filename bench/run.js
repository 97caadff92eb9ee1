#!/usr/bin/env node
// Owns the bench run: options, the bare baseline first, then each scenario against the server it needs, then the report.
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { loadScenarios } from './lib/scenarios.js';
import { measureScenario } from './lib/measure.js';
import { startBareServer } from './lib/bare-server.js';
import { FLOOR_ENTRY } from './lib/ingest-floor-server.js';
import { startService, stopAllServices } from './lib/service.js';
import { asRoundRow, poolRounds, printTable, writeResult } from './lib/report.js';
import { repoRoot } from './lib/paths.js';

const USAGE = `usage: node bench/run.js [scenario ...] [--duration 10] [--warmup 2] [--connections 64] [--rounds 1] [--strict] [--list]
  Measures the bare uWS handler first (the efficiency baseline), then each scenario (default: all).
  --connections  for every scenario; without it a scenario runs at its own count (default 64), and the
                 bare handler is measured again at each other count used, so a ratio never mixes loads
  --rounds  measure each load scenario this many times, each round right after a bare round of its own,
            and judge the pooled rounds (CPU and requests summed): drift of a shared machine then
            reaches both sides of the ratio alike
  --strict  exit 1 when a scenario misses its target (a miss is otherwise only reported)`;
const DEFAULT_CONNECTIONS = 64;

function readOptions() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string' },
      rounds: { type: 'string', default: '1' },
      strict: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const explicit = values.connections !== undefined;
  const numbers = {
    durationSeconds: Number(values.duration), warmupSeconds: Number(values.warmup), connections: Number(values.connections ?? DEFAULT_CONNECTIONS),
    rounds: Number(values.rounds),
  };
  for (const [k, v] of Object.entries(numbers)) {
    if (!Number.isFinite(v) || v < 0 || (k !== 'warmupSeconds' && v <= 0)) throw new Error(`bad --${k}: ${v}\n${USAGE}`);
  }
  if (!Number.isInteger(numbers.rounds)) throw new Error(`bad --rounds: ${numbers.rounds} (a whole number)\n${USAGE}`);
  numbers.connections = Math.floor(numbers.connections);
  return { ...numbers, explicitConnections: explicit, names: positionals, strict: values.strict, list: values.list, help: values.help };
}

/**
 * Servers are started lazily and kept while consecutive scenarios need the same one (same kind, same env).
 * The bare handler is kept apart for the whole run (idle, it costs nothing), so a round of bare between
 * two rounds of a scenario does not restart the service.
 * @returns {{ensure: (s: import('./lib/scenarios.js').Scenario) => Promise<any>, stop: () => Promise<void>}}
 */
function createServerKeeper() {
  /** @type {{key: string, server: any} | null} */
  let current = null;
  /** @type {any} */
  let bare = null;
  const stopCurrent = async () => {
    if (current) await current.server.stop();
    current = null;
  };
  return {
    async stop() {
      await stopCurrent();
      if (bare) await bare.stop();
      bare = null;
    },
    async ensure(scenario) {
      if (scenario.server === 'none') return null;
      if (scenario.server === 'bare') return (bare ??= await startBareServer());
      const key = `${scenario.server} ${JSON.stringify(Object.entries(scenario.env ?? {}).sort())}`;
      if (current?.key === key) return current.server;
      await stopCurrent();
      const server = scenario.server === 'ingest-floor' ? await startService({ entry: FLOOR_ENTRY, env: scenario.env ?? {} })
        : await startService({ env: scenario.env ?? {} });
      current = { key, server };
      return server;
    },
  };
}

function readRunInfo(/** @type {ReturnType<typeof readOptions>} */ opts) {
  let commit = null;
  try {
    commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // a fresh repository without commits still benchmarks
  }
  const { durationSeconds, warmupSeconds, connections, rounds } = opts;
  return { at: new Date().toISOString(), commit, node: process.version, durationSeconds, warmupSeconds, connections, rounds };
}

async function main() {
  const opts = readOptions();
  if (opts.help) return void console.log(USAGE);
  const scenarios = await loadScenarios();
  if (opts.list) {
    for (const { scenario } of scenarios.values()) console.log(`${scenario.name.padEnd(24)} ${scenario.description ?? ''}`);
    return;
  }
  const unknown = opts.names.filter((n) => !scenarios.has(n));
  if (unknown.length) throw new Error(`unknown scenario(s): ${unknown.join(', ')}; known: ${[...scenarios.keys()].join(', ')}`);
  const bare = scenarios.get('bare');
  if (!bare) throw new Error('bench/scenarios/bare.js is missing: it is the baseline of every run');
  const selected = opts.names.length ? opts.names : [...scenarios.keys()];
  const order = ['bare', ...new Set(selected.filter((n) => n !== 'bare'))];
  const runInfo = readRunInfo(opts);
  const keeper = createServerKeeper();
  process.once('SIGINT', () => {
    keeper.stop().finally(() => stopAllServices().finally(() => process.exit(130)));
  });

  const results = [];
  /** The bare handler's CPU per request by connection count: a scenario is compared at its own load. */
  const baselines = new Map();
  let failures = 0;
  const connectionsOf = (/** @type {any} */ scenario) => (opts.explicitConnections ? opts.connections : (scenario.connections ?? opts.connections));
  /** @param {string} label @param {any} entry @param {number} connections @param {number | null} baseline */
  const measureOnce = async (label, entry, connections, baseline) => {
    const target = await keeper.ensure(entry.scenario);
    const result = await measureScenario(entry, target, { ...opts, connections }, baseline);
    result.scenario = label;
    result.connections = connections;
    console.error(`bench: ${label} done (${Math.round(result.reqPerSec)} req/s)`);
    return result;
  };
  /** @param {any} result */
  const record = (result) => {
    results.push(result);
    writeResult(result, { ...runInfo, connections: result.connections });
  };
  /** @param {string} label @param {any} entry @param {number} connections */
  const measure = async (label, entry, connections) => {
    const result = await measureOnce(label, entry, connections, baselines.get(connections) ?? null);
    if (entry.scenario.name === 'bare') baselines.set(connections, result.serverCpuPerRequestUs);
    record(result);
  };
  /** Rounds of (bare, scenario), each scenario round against the bare round just before it; then the pool. */
  const measureRounds = async (/** @type {string} */ name, /** @type {any} */ entry, /** @type {number} */ connections) => {
    const pairs = [];
    for (let round = 1; round <= opts.rounds; round++) {
      const base = await measureOnce(`bare@${connections} #${round}`, bare, connections, null);
      const own = await measureOnce(`${name} #${round}`, entry, connections, base.serverCpuPerRequestUs);
      results.push(base, asRoundRow(own));
      pairs.push({ base, own });
    }
    record(poolRounds(entry.scenario, pairs, connections));
  };
  console.error(`bench: ${order.join(', ')}; warm-up ${opts.warmupSeconds} s, window ${opts.durationSeconds} s, ${opts.connections} connections`);
  try {
    for (const name of order) {
      const entry = /** @type {NonNullable<ReturnType<typeof scenarios.get>>} */ (scenarios.get(name));
      const connections = name === 'bare' ? opts.connections : connectionsOf(entry.scenario);
      try {
        if (opts.rounds > 1 && name !== 'bare' && entry.scenario.server !== 'none') {
          await measureRounds(name, entry, connections);
          continue;
        }
        // Without a baseline at this load no efficiency means anything: measure the bare handler there first.
        if (name !== 'bare' && !baselines.has(connections)) await measure(`bare@${connections}`, bare, connections);
        await measure(name, entry, connections);
      } catch (err) {
        failures++;
        console.error(`bench: ${name} failed: ${/** @type {Error} */ (err).stack ?? err}`);
        if (name === 'bare') break;
      }
    }
  } finally {
    await keeper.stop();
  }
  printTable(results);
  const misses = results.filter((r) => r.verdict === 'MISS').map((r) => r.scenario);
  if (misses.length) console.log(`target missed: ${misses.join(', ')}${opts.strict ? ' (--strict: failing)' : ''}`);
  if (failures || (opts.strict && misses.length)) process.exitCode = 1;
}

main().catch(async (err) => {
  console.error(err.message ?? err);
  await stopAllServices();
  process.exitCode = 1;
});
