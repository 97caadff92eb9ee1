// Owns turning measurements into the scenario result (CPU per request, efficiency, target), the table and JSON files.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { resultsDir } from './paths.js';

/**
 * @typedef {object} ScenarioResult
 * @property {string} scenario
 * @property {string} description
 * @property {number} requests
 * @property {number} wallSeconds
 * @property {number} reqPerSec
 * @property {number|null} p50Us
 * @property {number|null} p99Us
 * @property {number|null} maxUs
 * @property {number} errors
 * @property {number|null} generatorCpuShare generator CPU seconds / wall seconds (1.0 = one full core)
 * @property {Record<string, number>} serverCpuSeconds per group (service or bare, postgres)
 * @property {number|null} otherCpuSeconds machine CPU used outside server and generator during the window
 * @property {number|null} serverCpuPerRequestUs sum of serverCpuSeconds / requests, in µs
 * @property {number|null} serverSleeps times a thread of the server process went to sleep (voluntary
 *   context switches), PostgreSQL not included: the wake-ups it paid for
 * @property {number|null} serverSleepsPerRequest serverSleeps / requests
 * @property {number|null} efficiency baseline CPU per request / this CPU per request
 * @property {{efficiency?: number, p99Us?: number} | null} target
 * @property {'PASS'|'MISS'|null} verdict
 */

/**
 * Combine a load result and a CPU window into the reported figures.
 * @param {{name: string, description?: string, target?: {efficiency?: number, p99Us?: number}}} scenario
 * @param {any} load fields of LoadResult (or what a run(ctx) scenario returned)
 * @param {{wallSeconds: number, cpuSeconds: Record<string, number>, sleeps?: Record<string, number>, otherCpuSeconds?: number} | null} cpu
 * @param {number | null} baselineCpuPerRequestUs null while measuring the baseline itself
 * @returns {ScenarioResult & Record<string, unknown>}
 */
export function buildResult(scenario, load, cpu, baselineCpuPerRequestUs) {
  const { generator = null, ...server } = cpu?.cpuSeconds ?? {};
  const serverCpuSeconds = load.serverCpuSeconds ?? server;
  const serverTotal = Object.values(serverCpuSeconds).reduce((a, b) => a + b, 0);
  const requests = load.requests ?? 0;
  const cpuPerRequestUs = requests > 0 && Object.keys(serverCpuSeconds).length ? (serverTotal / requests) * 1e6 : null;
  // A run(ctx) scenario that measured its own reference in the same run (the gRPC empty method) says so.
  const baseline = load.baselineCpuPerRequestUs ?? baselineCpuPerRequestUs ?? cpuPerRequestUs;
  const efficiency = cpuPerRequestUs && baseline ? baseline / cpuPerRequestUs : null;
  const target = scenario.target ?? null;
  const wanted = target?.efficiency;
  const p99Bound = target?.p99Us;
  const p99Ok = p99Bound === undefined || (load.p99Us !== null && load.p99Us !== undefined && load.p99Us <= p99Bound);
  const verdict = wanted === undefined && p99Bound === undefined ? null
    : (wanted === undefined || (efficiency !== null && efficiency >= wanted)) && p99Ok ? 'PASS' : 'MISS';
  const wallSeconds = load.wallSeconds ?? cpu?.wallSeconds ?? 0;
  const { generator: _generatorSleeps, ...serverSleepGroups } = cpu?.sleeps ?? {};
  const serverSleeps = load.serverSleeps ?? sumValues(serverSleepGroups);
  return {
    ...load,
    scenario: scenario.name,
    description: scenario.description ?? '',
    requests,
    wallSeconds,
    reqPerSec: load.reqPerSec ?? (wallSeconds > 0 ? requests / wallSeconds : 0),
    p50Us: load.p50Us ?? null,
    p99Us: load.p99Us ?? null,
    maxUs: load.maxUs ?? null,
    errors: load.errors ?? 0,
    generatorCpuShare: load.generatorCpuShare ?? (generator !== null && wallSeconds > 0 ? generator / wallSeconds : null),
    serverCpuSeconds,
    otherCpuSeconds: load.otherCpuSeconds ?? cpu?.otherCpuSeconds ?? null,
    serverCpuPerRequestUs: cpuPerRequestUs,
    serverSleeps,
    serverSleepsPerRequest: serverSleeps !== null && requests > 0 ? serverSleeps / requests : null,
    baselineCpuPerRequestUs: baseline,
    efficiency,
    target,
    verdict,
  };
}

/**
 * A scenario's single round as a table row: its efficiency is against its own bare round, and only the
 * pooled row carries a verdict.
 * @param {ScenarioResult} result
 */
export function asRoundRow(result) {
  return { ...result, verdict: null };
}

/**
 * Pool rounds of (bare, scenario): CPU seconds and requests summed on each side, so the efficiency is
 * the ratio of the two totals, not a mean of ratios a single noisy round could swing. Latency is the
 * worst round's (p99, max) and the middle round's p50; each round's own figures stay in `rounds`.
 * @param {{name: string, description?: string, target?: {efficiency?: number, p99Us?: number}}} scenario
 * @param {{base: ScenarioResult, own: ScenarioResult & Record<string, unknown>}[]} pairs
 * @param {number} connections
 */
export function poolRounds(scenario, pairs, connections) {
  const bases = pairs.map((p) => p.base);
  const owns = pairs.map((p) => p.own);
  const total = (/** @type {ScenarioResult[]} */ rs, /** @type {(r: ScenarioResult) => number} */ f) => rs.reduce((a, r) => a + f(r), 0);
  /** @type {Record<string, number>} */
  const serverCpuSeconds = {};
  for (const r of owns) for (const [group, secs] of Object.entries(r.serverCpuSeconds)) serverCpuSeconds[group] = (serverCpuSeconds[group] ?? 0) + secs;
  const baseRequests = total(bases, (r) => r.requests);
  const baselineUs = baseRequests > 0 ? (total(bases, (r) => sumValues(r.serverCpuSeconds) ?? 0) / baseRequests) * 1e6 : null;
  const requests = total(owns, (r) => r.requests);
  const wallSeconds = total(owns, (r) => r.wallSeconds);
  const worst = (/** @type {(r: ScenarioResult) => number|null} */ f) => {
    const values = owns.map(f).filter((v) => v !== null && v !== undefined);
    return values.length ? Math.max(.../** @type {number[]} */ (values)) : null;
  };
  const p50s = owns.map((r) => r.p50Us).filter((v) => v !== null).sort((a, b) => /** @type {number} */ (a) - /** @type {number} */ (b));
  const load = {
    requests,
    wallSeconds,
    reqPerSec: wallSeconds > 0 ? requests / wallSeconds : 0,
    p50Us: p50s.length ? p50s[Math.floor(p50s.length / 2)] : null,
    p99Us: worst((r) => r.p99Us),
    maxUs: worst((r) => r.maxUs),
    errors: total(owns, (r) => r.errors),
    generatorCpuShare: wallSeconds > 0 ? total(owns, (r) => (r.generatorCpuShare ?? 0) * r.wallSeconds) / wallSeconds : null,
    otherCpuSeconds: total(owns, (r) => r.otherCpuSeconds ?? 0),
    serverCpuSeconds,
    serverSleeps: owns.every((r) => r.serverSleeps !== null) ? total(owns, (r) => /** @type {number} */ (r.serverSleeps)) : null,
    rounds: pairs.map(({ base, own }) => ({
      baselineCpuPerRequestUs: base.serverCpuPerRequestUs, serverCpuPerRequestUs: own.serverCpuPerRequestUs,
      efficiency: own.efficiency, reqPerSec: own.reqPerSec, p99Us: own.p99Us, errors: own.errors,
      baselineSleepsPerRequest: base.serverSleepsPerRequest, serverSleepsPerRequest: own.serverSleepsPerRequest,
    })),
  };
  return { ...buildResult(scenario, load, null, baselineUs), connections };
}

/** @param {number|null|undefined} v @param {number} digits */
const fmt = (v, digits = 0) => (v === null || v === undefined || Number.isNaN(v) ? '-' : v.toFixed(digits));

/** @type {Array<[string, (r: ScenarioResult) => string]>} */
const COLUMNS = [
  ['scenario', (r) => r.scenario],
  ['conns', (r) => (r.connections === undefined ? '' : String(r.connections))],
  ['req/s', (r) => fmt(r.reqPerSec)],
  ['p50 µs', (r) => fmt(r.p50Us)],
  ['p99 µs', (r) => fmt(r.p99Us)],
  ['max µs', (r) => fmt(r.maxUs)],
  ['errors', (r) => String(r.errors)],
  ['gen cpu', (r) => fmt(r.generatorCpuShare, 2)],
  ['srv cpu', (r) => fmt(sumValues(r.serverCpuSeconds), 2)],
  ['pg cpu', (r) => fmt(r.serverCpuSeconds.postgres, 2)],
  ['other cpu', (r) => fmt(r.otherCpuSeconds, 2)],
  ['cpu µs/req', (r) => fmt(r.serverCpuPerRequestUs, 2)],
  ['sleeps/req', (r) => fmt(r.serverSleepsPerRequest, 2)],
  ['efficiency', (r) => fmt(r.efficiency, 2)],
  ['target', (r) => (r.verdict === null ? '' : `${targetText(r.target)} ${r.verdict}`)],
];

/** @param {{efficiency?: number, p99Us?: number}} target */
function targetText(target) {
  const parts = [];
  if (target.efficiency !== undefined) parts.push(`>= ${target.efficiency}`);
  if (target.p99Us !== undefined) parts.push(`p99 <= ${target.p99Us} µs`);
  return parts.join(', ');
}

/** @param {Record<string, number>} o */
function sumValues(o) {
  const values = Object.values(o ?? {});
  return values.length ? values.reduce((a, b) => a + b, 0) : null;
}

/**
 * Print the results as an aligned table (numbers right-aligned), followed by notes on errors.
 * @param {ScenarioResult[]} results
 * @param {(line: string) => void} [print]
 */
export function printTable(results, print = console.log) {
  const rows = [COLUMNS.map(([h]) => h), ...results.map((r) => COLUMNS.map(([, f]) => f(r)))];
  const widths = COLUMNS.map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) {
    print(row.map((cell, i) => (i === 0 || i === row.length - 1 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ').trimEnd());
  }
  for (const r of results) {
    const detail = { ...(/** @type {any} */ (r).non2xx ?? {}), ...(/** @type {any} */ (r).transportErrors ?? {}) };
    if (r.errors > 0) print(`  ${r.scenario}: ${r.errors} errors ${JSON.stringify(detail)}`);
    const rounds = /** @type {any} */ (r).rounds;
    if (rounds) print(`  ${r.scenario}: ${rounds.length} rounds, efficiency ${rounds.map((/** @type {any} */ x) => fmt(x.efficiency, 2)).join(' / ')}, pooled ${fmt(r.efficiency, 2)}`);
    const logLines = /** @type {any} */ (r).serviceLogLines;
    if (logLines > 0) print(`  ${r.scenario}: the service wrote ${logLines} log lines during the window (logging costs CPU)`);
  }
}

/**
 * Write bench/results/<scenario>.json.
 * @param {ScenarioResult} result
 * @param {Record<string, unknown>} runInfo settings of the run (duration, connections, node version...)
 */
export function writeResult(result, runInfo) {
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${result.scenario}.json`);
  writeFileSync(file, `${JSON.stringify({ ...result, run: runInfo }, null, 2)}\n`);
  return file;
}
