// An authorization service on a fresh, migrated database seeded with a fixture world (no listeners).
import postgres from 'postgres';
import { createAuditWriter } from '../../../src/audit/writer.js';
import { createAuthz, type AuthzService, type AuthzSettings } from '../../../src/authz/index.js';
import type { ObjectRef } from '../../../src/authz/types.js';
import { createGenericPlanPool, type Sql } from '../../../src/db/client.js';
import { migrate } from '../../../src/db/migrate.js';
import { createNotifyHub, type NotifyHub } from '../../../src/db/notify-hub.js';
import { migrationsDir } from '../../../src/paths.js';
import { createTestDatabase } from '../../helpers/database.js';
import { testLogger } from '../../helpers/service.js';
import type { Obj } from '../fixtures/cases.js';
import { seedWorld, type Ids, type World } from './world.js';

export const SETTINGS: AuthzSettings = {
  cacheSubjects: 10_000, cacheObjects: 10_000, cacheDecisions: 100_000, cacheMaxBytes: 64 * 1024 * 1024,
  cacheTtlSecs: 60, auditAllowed: 'summary', auditSummarySecs: 60,
};

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface EngineFixture {
  sql: Sql;
  hub: NotifyHub;
  authz: AuthzService;
  ids: Ids;
  url: string;
  audit: ReturnType<typeof createAuditWriter>;
}

export async function startEngine(t: Teardown, world: World | null, settings: Partial<AuthzSettings> = {}): Promise<EngineFixture> {
  const db = await createTestDatabase();
  const log = testLogger();
  const sql = postgres(db.url, { max: 4, onnotice: () => undefined }) as unknown as Sql;
  await migrate(sql, migrationsDir, log);
  const ids = world ? await seedWorld(sql as never, world) : {};
  const hub = createNotifyHub(db.url, sql, log);
  await hub.start();
  const audit = createAuditWriter(sql, { batchSize: 100, flushIntervalMs: 20, maxQueue: 10_000 }, log);
  const lookups = createGenericPlanPool(db.url, { name: 'svc-authz', max: 2, connectTimeoutSecs: 10 });
  const authz = createAuthz({ sql, lookups, hub, audit, log, config: { ...SETTINGS, ...settings } });
  t.teardown(async () => {
    await authz.close();
    await audit.close();
    await hub.close();
    await lookups.end();
    await sql.end();
    await db.drop();
  });
  return { sql, hub, authz, ids, url: db.url, audit };
}

export function resolveObject(o: Obj, ids: Ids): ObjectRef {
  const id = (n: string) => {
    const v = ids[n];
    if (!v) throw new Error(`unknown fixture name ${n}`);
    return v;
  };
  if ('r' in o) return { kind: 'resource', id: id(o.r) };
  if ('e' in o) return { kind: 'entity', id: id(o.e) };
  if ('g' in o) return { kind: 'group', id: id(o.g) };
  if ('t' in o) return { kind: 'tenant', id: id(o.t) };
  if ('id' in o) return { kind: o.kind as ObjectRef['kind'], id: o.id };
  return { kind: o.kind as ObjectRef['kind'], id: null, tenantId: o.tenant ? id(o.tenant) : null };
}
