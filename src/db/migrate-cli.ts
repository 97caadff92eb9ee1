// `npm run migrate`: apply pending migrations (starting the embedded PostgreSQL if needed) and exit.
import { ConfigError, loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { migrationsDir } from '../paths.js';
import { createPool } from './client.js';
import { startEmbeddedPostgres } from './embedded.js';
import { migrate } from './migrate.js';

async function run(): Promise<void> {
  const config = loadConfig(process.env);
  const log = createLogger(config.logLevel);
  const embedded = config.database.url
    ? undefined
    : await startEmbeddedPostgres(config.database.embedded.dataDir, config.database.embedded.port, log);
  const sql = createPool(config.database.url ?? (embedded as { url: string }).url, config.database, log);
  try {
    const applied = await migrate(sql, migrationsDir, log);
    log.info(applied.length ? 'migrations applied' : 'database already up to date', { applied });
  } finally {
    await sql.end({ timeout: 5 });
    await embedded?.stop();
  }
}

run().catch((err: unknown) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `migration failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
