// Owns one in-process authorization engine wired the way the service wires it (its own pool and lookup
// connections, LISTEN hub and audit writer) on a bench database, for the scenarios that measure the
// engine without HTTP. Two of them on one database are two instances of the service as far as
// invalidation is concerned.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { createBenchDatabase, seedWorld } from './authz-dataset.js';
import { repoRoot } from './paths.js';

const dist = (p) => import(pathToFileURL(join(repoRoot, 'dist', 'src', p)).href);

/** A fresh bench database with the service's schema and the world seeded; drop() removes it. */
export async function createWorldDatabase(world) {
  const { migrate } = await dist('db/migrate.js');
  const { createLogger } = await dist('log.js');
  const db = await createBenchDatabase();
  const sql = postgres(db.url, { max: 10, onnotice: () => {} });
  try {
    await migrate(sql, join(repoRoot, 'sql'), createLogger('warn'));
    await seedWorld(sql, world);
  } catch (err) {
    await db.drop();
    throw err;
  } finally {
    await sql.end();
  }
  return db;
}

/**
 * @param {string} url a database made by createWorldDatabase
 * @returns {Promise<{authz: any, hub: any, sql: any, stop: () => Promise<void>}>}
 */
export async function startAuthzInstance(url) {
  const { createNotifyHub } = await dist('db/notify-hub.js');
  const { createAuditWriter } = await dist('audit/writer.js');
  const { createLogger } = await dist('log.js');
  const { createAuthz } = await dist('authz/index.js');
  const { createGenericPlanPool } = await dist('db/client.js');
  const log = createLogger('warn');
  const sql = postgres(url, { max: 10, onnotice: () => {} });
  const hub = createNotifyHub(url, sql, log);
  await hub.start();
  const audit = createAuditWriter(sql, { batchSize: 500, flushIntervalMs: 200, maxQueue: 50_000 }, log);
  // Entries live an hour: what a bench sees change, an invalidation changed.
  const lookups = createGenericPlanPool(url, { name: 'svc-authz', max: 4, connectTimeoutSecs: 10 });
  const authz = createAuthz({ sql, lookups, hub, audit, log, config: {
    cacheSubjects: 50_000, cacheObjects: 200_000, cacheDecisions: 500_000, cacheMaxBytes: 256 * 1024 * 1024, cacheTtlSecs: 3600,
    auditAllowed: 'summary', auditSummarySecs: 60,
  } });
  return {
    authz,
    hub,
    sql,
    async stop() {
      await authz.close();
      await audit.close();
      await hub.close();
      await lookups.end();
      await sql.end();
    },
  };
}
