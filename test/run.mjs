// Runs the test command against DATABASE_URL, or, when it is unset, against an embedded PostgreSQL
// started for this run under .data/test-pg (kept between runs so later runs start fast).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [command, ...args] = process.argv.slice(2);

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

let embedded;
const env = { ...process.env };
if (!env.DATABASE_URL) {
  const { startEmbeddedPostgres } = await import(path.join(root, 'dist/src/db/embedded.js'));
  const { createLogger } = await import(path.join(root, 'dist/src/log.js'));
  embedded = await startEmbeddedPostgres(path.join(root, '.data/test-pg'), await freePort(), createLogger('warn'));
  env.DATABASE_URL = embedded.url;
}

// Migrated databases are copied from templates (test/helpers/database.ts), one per migration set: a run
// starts by dropping those of earlier runs, so they do not pile up across migration changes.
{
  const { default: postgres } = await import('postgres');
  const admin = postgres(env.DATABASE_URL, { max: 1, onnotice: () => undefined });
  try {
    const old = await admin`select datname from pg_database where datname like 'svc\\_template\\_%'`;
    for (const { datname } of old) await admin.unsafe(`drop database if exists "${datname}"`).catch(() => undefined);
  } finally {
    await admin.end();
  }
}

// The whole run is scanned for secrets in logs and databases (test/helpers/secret-scan.ts) unless
// SVC_TEST_SECRET_SCAN=off; each test process reports into this directory, judged once the run is over.
const scanDir = env.SVC_TEST_SECRET_SCAN === 'off' ? undefined : mkdtempSync(path.join(os.tmpdir(), 'svc-secret-scan-'));
if (scanDir) env.SVC_TEST_SECRET_SCAN_DIR = scanDir;

// The tests run compiled (dist/test): stack traces point back into the TypeScript through the source maps.
env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --enable-source-maps`.trim();
const child = spawn(command, args, { stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
let code = await new Promise((resolve) => child.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
await embedded?.stop();
if (scanDir) {
  const { secretScanVerdict } = await import('./secret-scan-verdict.mjs');
  if (!secretScanVerdict(scanDir) && code === 0) code = 1;
  rmSync(scanDir, { recursive: true, force: true });
}
process.exit(code);
