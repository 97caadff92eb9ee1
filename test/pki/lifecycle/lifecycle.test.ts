// The lifecycle sweeper and the outbox relay, each with more than one instance on one database:
// certificate.expiring and certificate.authority_expiring written exactly once per certificate across two
// instances and a restart, at most the batch size per tick, one sweeper at a time; outbox records delivered
// in order to a webhook (a local HTTP server: one failure, its retry, a valid HMAC signature, a stable event
// id) and to a NOTIFY channel, never twice by two relays, and pruned after the retention.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import postgres from 'postgres';
import t from 'tap';
import { adminToken, AUTH_ENV } from '../../helpers/auth.js';
import { createTestDatabase } from '../../helpers/database.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { ISSUE_CSR, RENEW_CSR, REVOKE, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { startTestService, testLogger, type TestService } from '../../helpers/service.js';
import { sleep, waitUntil } from '../../helpers/wait.js';
import { createLifecycleSweeper } from '../../../src/pki/lifecycle/sweeper.js';
import { createOutboxRelay } from '../../../src/pki/outbox/relay.js';

let n = 0;
async function issueSome(ts: TestService, ca: ReturnType<typeof makeCaFiles>, count: number, tenantName = `t${n}`): Promise<string[]> {
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, `${tenantName}-${n++}`);
  const device = await createEntity(ts, admin, { kind: 'device', name: `d${n++}`, tenantId });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await ok(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `k${n++}` } });
    ids.push(r.issueCertificateFromCsrV2.certificate.credentialId);
  }
  return ids;
}

t.test('expiry notices: exactly once across two instances and a restart', async (t) => {
  const ca = makeCaFiles(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const env = {
    ...AUTH_ENV, ...ca.env,
    SVC_PKI_LIFECYCLE_ENABLED: 'true', SVC_PKI_LIFECYCLE_INTERVAL_SECS: '1',
    // Every certificate issued here (30 days by default) and every authority is inside its warning window.
    SVC_PKI_EXPIRY_WARNING_SECS: String(400 * 86400), SVC_PKI_AUTHORITY_WARNING_SECS: String(20 * 365 * 86400),
  };
  const one = await startTestService(t, env, db);
  const two = await startTestService(t, env, db);
  const sql = one.service.sql;
  const first = [...(await issueSome(one, ca, 3)), ...(await issueSome(two, ca, 2))];
  const counts = async () => sql<{ subject: string; event: string; n: number }[]>`
    select coalesce(payload ->> 'credential_id', payload ->> 'authority_id') as subject, event, count(*)::int as n
    from event_outbox where event in ('certificate.expiring', 'certificate.authority_expiring') group by 1, 2`;
  await waitUntil(async () => (await counts()).filter((r) => r.event === 'certificate.expiring').length === first.length, 10_000, 'notices for every certificate');
  await sleep(2500); // a few more ticks of both instances
  let rows = await counts();
  t.same(rows.filter((r) => r.n !== 1), [], 'no notice written twice');
  t.same(rows.filter((r) => r.event === 'certificate.expiring').map((r) => r.subject).sort(), [...first].sort());
  const [authorities] = await sql`select count(*)::int as n from pki_authorities where status in ('active', 'retiring')`;
  t.equal(rows.filter((r) => r.event === 'certificate.authority_expiring').length, authorities!.n, 'each live authority noticed once (root included)');
  const [payload] = await sql`select payload, tenant_id from event_outbox where event = 'certificate.expiring' and payload ->> 'credential_id' = ${first[0]!}`;
  t.match(payload!.payload, { credential_id: first[0], serial_number: String, not_after: String, expires_in_secs: Number });

  await two.service.stop();
  const three = await startTestService(t, env, db);
  const later = await issueSome(three, ca, 1);
  await waitUntil(async () => (await counts()).some((r) => r.subject === later[0]), 10_000, 'notice after the restart');
  await sleep(2500);
  rows = await counts();
  t.same(rows.filter((r) => r.n !== 1), [], 'still once each after a restart');
  t.equal(rows.filter((r) => r.event === 'certificate.expiring').length, first.length + 1);
});

t.test('the sweeper: batch size per tick, one at a time, renewed and revoked certificates skipped', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startTestService(t, { ...AUTH_ENV, ...ca.env });
  const sql = ts.service.sql;
  const ids = await issueSome(ts, ca, 5);
  const admin = await adminToken(ts);
  await ok(ts, admin, REVOKE, { i: { credentialId: ids[4] } });
  const renewed = (await ok(ts, admin, RENEW_CSR, { i: { credentialId: ids[3], csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: 'renew' } }))
    .renewCertificateFromCsrV2.certificate.credentialId as string;
  const sweeper = createLifecycleSweeper({
    sql, log: testLogger(), settings: { intervalSecs: 60, batchSize: 2, expiryWarningSecs: 400 * 86400, authorityWarningSecs: 0 },
  });
  // Another instance sweeping holds the lock: this one skips its tick.
  const other = postgres(ts.db.url, { max: 1 });
  t.teardown(() => other.end());
  await other.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended('pki:lifecycle-sweeper', 0))`;
    t.same(await sweeper.sweep(), { swept: false, authorities: 0, certificates: 0 });
  });
  t.same(await sweeper.sweep(), { swept: true, authorities: 0, certificates: 2 });
  t.same(await sweeper.sweep(), { swept: true, authorities: 0, certificates: 2 });
  t.same(await sweeper.sweep(), { swept: true, authorities: 0, certificates: 0 }, 'the revoked and the renewed one are not noticed');
  const noticed = await sql`select subject_id from certificate_lifecycle_notices where event = 'certificate.expiring'`;
  t.same(noticed.map((r) => r.subject_id).sort(), [...ids.slice(0, 3), renewed].sort());
});

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  status: number;
}

async function webhookReceiver(t: { teardown(fn: () => unknown): void }, failFirst: number) {
  const received: Received[] = [];
  let failures = failFirst;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const status = failures-- > 0 ? 503 : 200;
      received.push({ headers: req.headers, body, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` };
}

const SECRET = 'webhook-test-secret';

t.test('outbox relay: webhook with a failure, its retry and a valid signature; NOTIFY; in order; pruned', async (t) => {
  const ca = makeCaFiles(t);
  const hook = await webhookReceiver(t, 1);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const listener = postgres(db.url, { max: 1 });
  t.teardown(() => listener.end());
  const notified: string[] = [];
  await listener.listen('pki_events', (payload) => notified.push(payload));
  const ts = await startTestService(t, {
    ...AUTH_ENV, ...ca.env,
    SVC_PKI_OUTBOX_WEBHOOK_URL: hook.url, SVC_PKI_OUTBOX_WEBHOOK_SECRET: SECRET, SVC_PKI_OUTBOX_NOTIFY_CHANNEL: 'pki_events',
    SVC_PKI_OUTBOX_POLL_INTERVAL_MS: '100', SVC_PKI_OUTBOX_RETRY_BASE_MS: '300', SVC_PKI_OUTBOX_RETENTION_SECS: '2',
  }, db);
  const sql = ts.service.sql;
  const ids = await issueSome(ts, ca, 3);
  await waitUntil(async () => {
    const [row] = await sql`select count(*)::int as n from event_outbox where delivered_at is null`;
    return row!.n === 0;
  }, 15_000, 'every record delivered');
  const delivered = hook.received.filter((r) => r.status === 200).map((r) => JSON.parse(r.body));
  const failed = hook.received.filter((r) => r.status !== 200).map((r) => JSON.parse(r.body));
  t.equal(failed.length, 1, 'one refused delivery');
  t.equal(delivered[0].id, failed[0].id, 'the refused record was retried first, with the same event id');
  const seqs = delivered.map((d) => d.seq);
  t.same(seqs, [...seqs].sort((a, b) => a - b), 'delivered in order');
  t.equal(new Set(delivered.map((d) => d.id)).size, delivered.length, 'no record delivered twice once accepted');
  for (const id of ids) t.ok(delivered.some((d) => d.event === 'certificate.issue' && d.payload.credential_id === id), `issuance of ${id} delivered`);
  for (const r of hook.received) {
    const timestamp = String(r.headers['x-svc-timestamp']);
    const expected = `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${r.body}`).digest('hex')}`;
    t.equal(r.headers['x-svc-signature'], expected, 'HMAC-SHA256 signature verifies');
    t.equal(r.headers['x-svc-event-id'], JSON.parse(r.body).id);
  }
  const [retried] = await sql`select attempts, last_error from event_outbox where id = ${failed[0].id}`;
  if (retried) t.equal(retried.attempts, 2, 'two attempts recorded');
  await waitUntil(() => notified.length >= delivered.length, 5000, 'NOTIFY of every record');
  t.same(notified.map((p) => JSON.parse(p).id), delivered.map((d) => d.id), 'the NOTIFY channel carries the same records in the same order');
  await waitUntil(async () => {
    const [row] = await sql`select count(*)::int as n from event_outbox`;
    return row!.n === 0;
  }, 10_000, 'delivered records pruned after the retention');
});

t.test('two relays on one database deliver each record once', async (t) => {
  const ca = makeCaFiles(t);
  const hook = await webhookReceiver(t, 0);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const env = {
    ...AUTH_ENV, ...ca.env, SVC_PKI_OUTBOX_WEBHOOK_URL: hook.url, SVC_PKI_OUTBOX_WEBHOOK_SECRET: SECRET, SVC_PKI_OUTBOX_POLL_INTERVAL_MS: '50',
  };
  const one = await startTestService(t, env, db);
  const two = await startTestService(t, env, db);
  await issueSome(one, ca, 3);
  await issueSome(two, ca, 3);
  await waitUntil(async () => {
    const [row] = await one.service.sql`select count(*)::int as n from event_outbox where delivered_at is null`;
    return row!.n === 0;
  }, 15_000, 'every record delivered');
  const ids = hook.received.map((r) => JSON.parse(r.body).id);
  t.ok(ids.length >= 6);
  t.equal(new Set(ids).size, ids.length, 'no duplicates: one relay at a time');
});

t.test('a relay pass keeps no transaction open across a webhook call; a relay whose lock connection dies is taken over', async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV });
  await ts.service.sql`insert into event_outbox (event, payload) values ('test.first', '{"n": 1}'), ('test.second', '{"n": 2}')`;
  // A receiver that holds the first call until told to answer.
  const bodies: string[] = [];
  let answer: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (answer = resolve));
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      bodies.push(body);
      void held.then(() => res.writeHead(200).end());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  const settings = {
    webhookUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, webhookSecret: SECRET, webhookTimeoutMs: 10_000,
    pollIntervalMs: 60_000, batchSize: 10, retryBaseMs: 100, retryMaxMs: 1000, retentionSecs: 3600,
  };
  const relay = (name: string) => {
    const r = createOutboxRelay({ url: ts.db.url, sql: ts.service.sql, log: testLogger(), settings, applicationName: name });
    t.teardown(() => r.stop());
    return r;
  };
  const a = relay('relay-a');
  const b = relay('relay-b');

  const passA = a.tick();
  await waitUntil(() => bodies.length === 1, 5000, 'relay a calls the webhook');
  const [open] = await ts.service.sql`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`;
  t.equal(open!.n, 0, 'no transaction held open while the webhook answers');
  t.same(await b.tick(), { ran: false, delivered: 0, failed: 0, pruned: 0 }, 'the other relay skips while a delivers');

  // Relay a's lock connection dies while the webhook answers: a records that delivery, then stops.
  await ts.service.sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'relay-a' and datname = current_database()`;
  await sleep(200);
  answer();
  t.same(await passA, { ran: true, delivered: 1, failed: 0, pruned: 0 }, 'relay a records the answered delivery and goes no further');
  t.same(await b.tick(), { ran: true, delivered: 1, failed: 0, pruned: 0 }, 'relay b takes over: the lock went with the connection');
  t.same(bodies.map((body) => (JSON.parse(body) as { event: string }).event), ['test.first', 'test.second'], 'each once, in order');
  t.same(await a.tick(), { ran: true, delivered: 0, failed: 0, pruned: 0 }, 'relay a runs again on a new connection');
  const [pending] = await ts.service.sql`select count(*)::int as n from event_outbox where delivered_at is null`;
  t.equal(pending!.n, 0);
});
