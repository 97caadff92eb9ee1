// Issue 21 point 7: anonymous GET /health answers the overall status and each component's state, nothing
// more; pool sizes, rate-limit policies, proxy ranges, key ids, messages and the version go to platform
// administrators through GraphQL systemStatus (INTERFACES.md 1.10 SystemStatus), refused to anyone else.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { adminToken, AUTH_ENV } from '../helpers/auth.js';
import { createTenant, createUser, fails, ok } from '../helpers/management.js';
import { startTestService } from '../helpers/service.js';

const KEK = randomBytes(32).toString('base64');
const PROXIES = '10.9.8.0/24';
const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const ts = await startTestService(t, {
  ...AUTH_ENV, SVC_KEY_ENCRYPTION_KEY: KEK, SVC_TRUSTED_PROXY_CIDRS: PROXIES, SVC_DB_POOL_MAX: '7', SVC_REVISION: 'rev-4f2a9c1',
});
const STATUS = `{ systemStatus {
  status version revision httpReady grpcReady
  database { status message } migrations { status message } signingKeys { status message } workers { status } notifications { status }
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
    for (const name of ['ca_keys', 'database', 'migrations', 'notifications', 'signing_keys', 'workers']) {
      t.same(Object.keys(body[name] as object), ['status'], `${path}: ${name} has its state, no message`);
    }
    t.notOk(text.includes(PROXIES) || text.includes('rev-4f2a9c1') || text.includes(version) || /pool|rate|key_id|kek/i.test(text), `${path}: no settings, ranges, ids or version`);
  }
});

t.test('systemStatus: refused without platform manage, answered with it', async (t) => {
  t.match(await fails(ts, undefined, STATUS), [{ message: 'missing authentication', extensions: { code: 'UNAUTHENTICATED' } }]);
  const alice = await createUser(ts, 'alice');
  await createTenant(ts, alice.token, 'Acme', 'acme');
  t.match(await fails(ts, alice.token, STATUS), [{ message: 'forbidden', extensions: { code: 'FORBIDDEN' } }], 'a tenant administrator is refused');

  const status = (await ok(ts, await adminToken(ts), STATUS)).systemStatus;
  t.match(status, {
    status: /^(ok|degraded)$/, version, revision: 'rev-4f2a9c1', httpReady: true, grpcReady: false,
    database: { status: 'ok' }, migrations: { status: 'ok' }, signingKeys: { status: 'ok', message: null }, workers: { status: 'ok' },
    certificateIssuer: null,
    dbPool: { maxConnections: 7, minConnections: 0, acquireTimeoutSecs: null, connectTimeoutSecs: 10, idleTimeoutSecs: 60, maxLifetimeSecs: 1800, size: null, idle: null },
    signingKeyState: { configuredKeyId: String, encryptedCount: 2, plaintextCount: 0, totalCount: 2, plaintextAllowed: false },
    auditRetention: { enabled: false, days: null },
    rateLimits: { enabled: false, trustedProxyCidrs: [PROXIES] },
  });
  t.ok(status.rateLimits.policies.some((p: { category: string }) => p.category === 'auth_routes'), 'the policies are listed');
});
