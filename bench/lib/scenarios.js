// Owns finding and checking scenario modules: one file in bench/scenarios/ is one scenario.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { scenariosDir } from './paths.js';

/**
 * @typedef {object} Scenario the default export of bench/scenarios/<name>.js
 * @property {string} name same as the file name
 * @property {string} description
 * @property {'bare'|'service'|'ingest-floor'|'none'} [server] what receives the load: the bare handler, the service
 *   (default for request scenarios), the ingest floor (bench/lib/ingest-floor-server.js) or nothing (default
 *   for run scenarios, which measure in-process code)
 * @property {Record<string,string>} [env] extra environment for the service or the floor; scenarios with equal env share one
 * @property {{efficiency?: number, p99Us?: number}} [target] efficiency: at least this; p99Us: the p99 at most this (both must hold)
 * @property {number} [connections] the load this scenario is judged at (default: the run's); the bare handler is measured at it too
 * @property {(ctx: any) => unknown} [setup] runs in the bench process before load; its return value becomes ctx.data
 *   (plain data: it is sent to the generator process)
 * @property {(ctx: any) => import('./load.js').RequestSpec} [request] runs in the generator process
 * @property {(ctx: any) => Promise<Record<string, unknown>>} [run] custom measurement in the bench process instead of
 *   HTTP load; returns the result fields (requests, wallSeconds, p50Us, p99Us, maxUs, errors, serverCpuSeconds)
 * @property {(ctx: any, result: any) => unknown} [teardown] after the window; a returned object is merged into the result
 *   (e.g. {stored} next to {acknowledged})
 */

/** @returns {Promise<Map<string, {scenario: Scenario, file: string}>>} name -> module and its path */
export async function loadScenarios() {
  const files = readdirSync(scenariosDir).filter((f) => f.endsWith('.js')).sort();
  const scenarios = new Map();
  for (const f of files) {
    const file = join(scenariosDir, f);
    const scenario = (await import(pathToFileURL(file).href)).default;
    checkScenario(scenario, f);
    scenarios.set(scenario.name, { scenario: { server: scenario.run ? 'none' : 'service', ...scenario }, file });
  }
  return scenarios;
}

/**
 * @param {any} s
 * @param {string} file
 */
function checkScenario(s, file) {
  const problems = [];
  if (!s || typeof s !== 'object') problems.push('has no default export object');
  else {
    if (`${s.name}.js` !== file) problems.push(`name "${s.name}" differs from the file name`);
    if (typeof s.request !== 'function' && typeof s.run !== 'function') problems.push('exports neither request(ctx) nor run(ctx)');
    if (s.server && !['bare', 'service', 'ingest-floor', 'none'].includes(s.server)) problems.push(`unknown server "${s.server}"`);
  }
  if (problems.length) throw new Error(`bench/scenarios/${file}: ${problems.join('; ')}`);
}
