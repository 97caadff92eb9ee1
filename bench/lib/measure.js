// Owns measuring one scenario: warm-up, the measured window's load and CPU, setup and teardown hooks.
import hdr from 'hdr-histogram-js';
import { startLoad } from './load.js';
import { takeCpuSnapshot, diffCpuSnapshots, startCpuWindow } from './cpu.js';
import { buildResult } from './report.js';

/**
 * @typedef {{pid: number, ports: Record<string, number>, databaseUrl?: string, countLogLines?: () => number}} Target
 * @typedef {{durationSeconds: number, warmupSeconds: number, connections: number}} RunOptions
 */

/**
 * @param {{scenario: import('./scenarios.js').Scenario, file: string}} entry
 * @param {Target | null} target the server receiving the load (null for run scenarios with server "none")
 * @param {RunOptions} options
 * @param {number | null} baselineCpuPerRequestUs
 */
export async function measureScenario({ scenario, file }, target, options, baselineCpuPerRequestUs) {
  /** Plain data: this is what request(ctx) sees in the generator process. */
  const ctx = {
    scenario: scenario.name,
    ports: target?.ports ?? {},
    databaseUrl: target?.databaseUrl ?? null,
    ...options,
    data: /** @type {unknown} */ (null),
  };
  if (scenario.setup) ctx.data = (await scenario.setup({ ...ctx, target })) ?? null;
  const measured = scenario.run
    ? await measureInProcess(scenario, { ...ctx, target })
    : await measureHttp(scenario, file, /** @type {Target} */ (target), ctx, options);
  // cpu (the window's CPU seconds by group) lets a teardown relate a same-run peer to the scenario's own cost.
  const extra = scenario.teardown ? await scenario.teardown({ ...ctx, target, cpu: measured.cpu }, measured.load) : null;
  const load = { ...measured.load, ...(extra && typeof extra === 'object' ? extra : {}) };
  return buildResult(scenario, load, measured.cpu, baselineCpuPerRequestUs);
}

/**
 * @param {import('./scenarios.js').Scenario} scenario
 * @param {string} file
 * @param {Target} target
 * @param {object} ctx
 * @param {RunOptions} options
 */
async function measureHttp(scenario, file, target, ctx, options) {
  const serverGroup = scenario.server === 'bare' ? 'bare' : 'service';
  // The bare handler never touches PostgreSQL: leaving PostgreSQL's background work out of the
  // baseline keeps it the cheapest possible, which is the stricter comparison for every scenario.
  const cpuOpts = { includePostgres: scenario.server !== 'bare' };
  /** @type {ReturnType<typeof takeCpuSnapshot> | null} */
  let before = null;
  /** @type {ReturnType<typeof takeCpuSnapshot> | null} */
  let after = null;
  let logLinesBefore = 0;
  let logLinesAfter = 0;
  const roots = (/** @type {number} */ pid) => ({ [serverGroup]: target.pid, generator: pid });
  const { done } = startLoad({
    scenarioFile: file,
    ctx,
    ...options,
    onWindowStart: (pid) => {
      before = takeCpuSnapshot(roots(pid), cpuOpts);
      logLinesBefore = target.countLogLines?.() ?? 0;
    },
    onWindowEnd: (pid) => {
      after = takeCpuSnapshot(roots(pid), cpuOpts);
      logLinesAfter = target.countLogLines?.() ?? 0;
    },
  });
  const load = await done;
  if (!before || !after) throw new Error('load generator finished without reporting its window');
  return { load: { ...load, serviceLogLines: logLinesAfter - logLinesBefore }, cpu: diffCpuSnapshots(before, after) };
}

/**
 * A run(ctx) scenario measures its own window; ctx gives it the same tools the HTTP path uses.
 * @param {import('./scenarios.js').Scenario} scenario
 * @param {any} ctx
 */
async function measureInProcess(scenario, ctx) {
  const helpers = {
    /** CPU of this bench process (and its children) plus PostgreSQL, over a window the scenario chooses. */
    startCpuWindow: () => startCpuWindow({ bench: process.pid }),
    /** Same histogram settings as the generator: whole µs up to 60 s, 3 significant digits. */
    createHistogram: () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 }),
  };
  const load = await /** @type {NonNullable<typeof scenario.run>} */ (scenario.run)({ ...ctx, ...helpers });
  return { load, cpu: null };
}
