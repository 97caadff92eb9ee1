// Owns the service under test: its environment, a throwaway database, start and clean stop.
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import postgres from 'postgres';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';

const ADMIN_DATABASE_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Every listener on an ephemeral port, so parallel runs and a developer's own service never collide. */
const BASE_ENV = {
  SVC_HTTP_ADDR: '127.0.0.1:0',
  SVC_MESSAGING_ADDR: '127.0.0.1:0',
  SVC_READER_ADDR: '127.0.0.1:0',
  SVC_BROKER_ADMIN_ADDR: '127.0.0.1:0',
  SVC_MQTT_ADDR: 'off',
  // CoAP defaults to a fixed UDP port on all interfaces: off, like MQTT, unless a scenario turns it on.
  SVC_COAP_ADDR: 'off',
  SVC_GRPC_ADDR: 'off',
  // The certificate publication listener (node:http) is on by default at a fixed port: ephemeral here too.
  SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0',
  // The harness sets its own limits (DESIGN.md "Rate limits"): a per-IP limit would turn load into 429s.
  SVC_RATE_LIMIT_ENABLED: 'false',
  // info, not warn: the "listening"/"ready" lines are info and are not promised at warn.
  SVC_LOG_LEVEL: 'info',
};

/** @type {Set<() => Promise<unknown>>} stops of services still running, for cleanup on Ctrl-C */
const running = new Set();

/**
 * @typedef {object} Service
 * @property {number} pid
 * @property {Record<string, number>} ports
 * @property {string} databaseUrl
 * @property {() => number} countLogLines
 * @property {() => string} readTail
 * @property {() => Promise<{code: number|null, signal: string|null}>} stop SIGTERM, wait, drop the database it created
 */

/**
 * Start `node dist/src/main.js` from the repo root with the bench environment plus `env`.
 * DATABASE_URL: opts.databaseUrl, else the environment's, else a fresh bench_<random> dropped by stop().
 * nodeArgs go before the entry file (node's own options, e.g. --cpu-prof, which NODE_OPTIONS refuses).
 * onLine: every log line of the service (spawnServer's).
 * @param {{env?: Record<string,string>, databaseUrl?: string, entry?: string, nodeArgs?: string[], onLine?: (line: string) => void}} [opts]
 * @returns {Promise<Service>}
 */
export async function startService({ env = {}, databaseUrl, entry, nodeArgs = [], onLine } = {}) {
  const main = entry ?? process.env.BENCH_SERVICE_ENTRY ?? join('dist', 'src', 'main.js');
  if (!existsSync(join(repoRoot, main))) throw new Error(`${main} not found under ${repoRoot}: run \`npm run build\` first`);
  const givenUrl = databaseUrl ?? process.env.DATABASE_URL;
  const ownDatabase = givenUrl ? null : await createDatabase();
  const url = givenUrl ?? /** @type {{url: string}} */ (ownDatabase).url;
  let server;
  try {
    // BENCH_SERVICE_NODE_ARGS: node flags for the service alone (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
    const envArgs = process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    server = await spawnServer({ args: [...nodeArgs, ...envArgs, main], cwd: repoRoot, env: { ...BASE_ENV, DATABASE_URL: url, ...env }, name: main, onLine });
  } catch (err) {
    if (ownDatabase) await dropDatabase(ownDatabase.name);
    throw err;
  }
  const stop = async () => {
    running.delete(stop);
    const exit = await server.stop();
    if (exit.code !== 0) console.error(`warning: service exited with code ${exit.code} signal ${exit.signal} on SIGTERM\n${server.readTail()}`);
    if (ownDatabase) await dropDatabase(ownDatabase.name);
    return exit;
  };
  running.add(stop);
  return { pid: server.pid, ports: server.ports, databaseUrl: url, countLogLines: server.countLogLines, readTail: server.readTail, stop };
}

/** Stop every service still running (used on SIGINT and on failure). */
export async function stopAllServices() {
  await Promise.allSettled([...running].map((stop) => stop()));
}

export async function createDatabase() {
  const name = `bench_${randomBytes(6).toString('hex')}`;
  const sql = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await sql.end();
  }
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

/** @param {string} name */
export async function dropDatabase(name) {
  const sql = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
  try {
    // FORCE: a pool connection the service failed to close must not leave the database behind.
    await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } catch (err) {
    console.error(`warning: could not drop database ${name}: ${/** @type {Error} */ (err).message}`);
  } finally {
    await sql.end();
  }
}
