// Issue 21 point 7: anonymous GET /health answers the overall status and each component's state, nothing
// more; pool sizes, rate-limit policies, proxy ranges, key ids, messages and the version go to platform
// administrators through GraphQL systemStatus (INTERFACES.md 1.10 SystemStatus), refused to anyone else.
// Issue 34 point 4: httpReady and grpcReady are component checks, the pool's open and idle connections are
// its real counts, and audit retention shows its configured numbers and the latest pass (values checked).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { poolCounts, type Sql } from '../../src/db/client.js';
import { projectRoot } from '../../src/paths.js';
import { adminToken, AUTH_ENV } from '../helpers/auth.js';
import { createTenant, createUser, fails, ok } from '../helpers/management.js';
import { startTestService } from '../helpers/service.js';

const KEK = randomBytes(32).toString('base64');
const PROXIES = '10.9.8.0/24';
const version = (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;

const ts = await startTestService(t, {
  ...AUTH_ENV, SVC_KEY_ENCRYPTION_KEY: KEK, SVC_TRUSTED_PROXY_CIDRS: PROXIES, SVC_DB_POOL_MAX: '7', SVC_REVISION: 'rev-4f2a9c1',
  SVC_GRPC_ADDR: '127.0.0.1:0',
  SVC_AUDIT_RETENTION_ENABLED: 'true', SVC_AUDIT_RETENTION_DAYS: '2', SVC_AUDIT_CLEANUP_INTERVAL_SECS: '3600', SVC_AUDIT_CLEANUP_BATCH_SIZE: '2',
});
const STATUS = `{ systemStatus {
  status version revision httpReady { status message } grpcReady { status message }
  database { status message } migrations { status message } signingKeys { status message } workers { status message } notifications { status message }
  certificateIssuer { status }
  dbPool { maxConnections minConnections acquireTimeoutSecs connectTimeoutSecs idleTimeoutSecs maxLifetimeSecs size idle }
  signingKeyState { configuredKeyId encryptedCount plaintextCount totalCount plaintextAllowed }
  auditRetention { enabled days cleanupIntervalSecs cleanupBatchSize lastCleanup }
  rateLimits { enabled policies { category maxRequests windowSecs } trustedProxyCidrs }
} }`;

t.test('anonymous /health: status and component states only', async (t) => {
  for (const path of ['/health', '/health/ready']) {
    const res = await fetch(`${ts.url()}${path}`);
    t.equal(res.status, 200);
    const text = await res.text();
    const body = JSON.parse(text) as Record<string, unknown>;
    t.same(Object.keys(body).sort(), ['ca_keys', 'database', 'grpc_ready', 'http_ready', 'migrations', 'notifications', 'signing_keys', 'status', 'workers'], path);
    for (const name of ['ca_keys', 'database', 'grpc_ready', 'http_ready', 'migrations', 'notifications', 'signing_keys', 'workers']) {
      t.same(Object.keys(body[name] as object), ['status'], `${path}: ${name} has its state, no message`);
    }
    t.notOk(text.includes(PROXIES) || text.includes('rev-4f2a9c1') || text.includes(version) || /pool|rate|key_id|kek|retention|127\.0\.0\.1/i.test(text), `${path}: no settings, ranges, ids, addresses or version`);
    t.same(body.http_ready, { status: 'ok' });
    t.same(body.grpc_ready, { status: 'ok' });
  }
});

t.test('systemStatus: refused without platform manage, answered with it', async (t) => {
  t.match(await fails(ts, undefined, STATUS), [{ message: 'missing authentication', extensions: { code: 'UNAUTHENTICATED' } }]);
  const alice = await createUser(ts, 'alice');
  await createTenant(ts, alice.token, 'Acme', 'acme');
  t.match(await fails(ts, alice.token, STATUS), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }], 'a tenant administrator is refused');

  const status = (await ok(ts, await adminToken(ts), STATUS)).systemStatus;
  t.match(status, {
    status: /^(ok|degraded)$/, version, revision: 'rev-4f2a9c1',
    httpReady: { status: 'ok', message: `ready; serving on 127.0.0.1:${ts.service.ports.http}` },
    grpcReady: { status: 'ok', message: `serving on 127.0.0.1:${ts.service.ports.grpc}` },
    database: { status: 'ok', message: 'reachable' }, migrations: { status: 'ok', message: 'all applied' },
    signingKeys: { status: 'ok', message: 'signing keys loaded, sealed with SVC_KEY_ENCRYPTION_KEY' }, workers: { status: 'ok', message: /worker threads answering$/ },
    notifications: { status: 'ok', message: 'LISTEN connection up' },
    certificateIssuer: null,
    dbPool: { maxConnections: 7, minConnections: 0, acquireTimeoutSecs: null, connectTimeoutSecs: 10, idleTimeoutSecs: 60, maxLifetimeSecs: 1800, size: Number, idle: Number },
    signingKeyState: { configuredKeyId: String, encryptedCount: 2, plaintextCount: 0, totalCount: 2, plaintextAllowed: false },
    auditRetention: { enabled: true, days: 2, cleanupIntervalSecs: 3600, cleanupBatchSize: 2 },
    rateLimits: { enabled: false, trustedProxyCidrs: [PROXIES] },
  });
  t.ok(status.rateLimits.policies.some((p: { category: string }) => p.category === 'auth_routes'), 'the policies are listed');
});

t.test('dbPool: the pool\'s own open and idle connections, this instance only', async (t) => {
  const admin = await adminToken(ts);
  const pool = async () => (await ok(ts, admin, '{ systemStatus { dbPool { maxConnections size idle } } }')).systemStatus.dbPool as { maxConnections: number; size: number; idle: number };
  // Three transactions hold a connection each until released: they are open and not idle.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let began = 0;
  const held = [1, 2, 3].map(() => ts.service.sql.begin(async (tx) => {
    await tx`select 1`;
    began++;
    await gate;
  }));
  while (began < 3) await new Promise((r) => setImmediate(r));
  const busy = await pool();
  t.ok(busy.size >= 3 && busy.size <= 7, `open: ${busy.size}, within the pool's maximum`);
  t.ok(busy.size - busy.idle >= 3, `in use: ${busy.size - busy.idle}, at least the three held`);
  release();
  await Promise.all(held);
  const calm = await pool();
  t.ok(calm.size >= 3, 'connections stay open (idle timeout 60 s)');
  t.ok(calm.size - calm.idle <= 2 && calm.idle >= 1, `released: ${calm.idle} of ${calm.size} idle`);
  t.equal(poolCounts({} as Sql), null, 'an install without the postgres.js patch reads null, not 0');
});

t.test('auditRetention: deletes entries past the retention in batches, records the pass, shows it', async (t) => {
  const sql = ts.service.sql;
  const retention = ts.service.auditRetention;
  await retention.run(); // joins (or follows) the pass the start scheduled
  const admin = await adminToken(ts);
  const RETENTION = '{ systemStatus { auditRetention { enabled days cleanupIntervalSecs cleanupBatchSize lastCleanup } } }';
  const first = (await ok(ts, admin, RETENTION)).systemStatus.auditRetention;
  t.match(first, { enabled: true, days: 2, cleanupIntervalSecs: 3600, cleanupBatchSize: 2, lastCleanup: { deleted_rows: Number, retention_days: 2, batch_size: 2, ran_at: String } },
    'the pass made at start is shown, snake_case as the upstream UI reads it');

  await sql`insert into audit_log (event, outcome, details, created_at)
    select 'test.old', 'allow', jsonb_build_object('n', n), now() - interval '3 days' - n * interval '1 minute' from generate_series(1, 5) n`;
  await sql`insert into audit_log (event, outcome, created_at) values ('test.recent', 'allow', now() - interval '1 day')`;
  t.equal(await retention.run(), null, 'another pass within half an interval is skipped (made by this or another instance)');
  const later = new Date(Date.now() + 3600_000);
  const result = await retention.run(later);
  t.match(result, { deletedRows: 5 }, 'five entries older than two days, in batches of two');
  const left = await sql<{ event: string }[]>`select event from audit_log where event like 'test.%'`;
  t.same(left.map((r) => r.event), ['test.recent'], 'the entry inside the retention stays');
  const shown = (await ok(ts, admin, RETENTION)).systemStatus.auditRetention.lastCleanup;
  t.match(shown, { deleted_rows: 5, retention_days: 2, batch_size: 2, ran_at: later.toISOString(), cutoff: new Date(later.getTime() - 2 * 86_400_000).toISOString() });
  const [event] = await sql<{ outcome: string; tenant_id: string | null }[]>`
    select outcome, tenant_id from audit_log where event = 'audit.retention_cleanup' order by created_at desc limit 1`;
  t.same(event, { outcome: 'allow', tenant_id: null }, 'recorded as a platform audit event');
});
