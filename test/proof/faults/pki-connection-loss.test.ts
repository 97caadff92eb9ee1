// Issue 35.2: PostgreSQL connections terminated during issuance (issueCertificateFromCsrV2 under load) and
// revocation (revokeCertificateV2). Every certificate acknowledged to its caller is stored with its audit
// event and outbox record; every failure reaches its caller as a GraphQL error with a code (never an HTTP
// 500, never a stack); nothing is half written (no certificate without its audit and outbox rows, no
// revocation without its ledger entry, audit event and outbox record); the service recovers by itself.
import postgres from 'postgres';
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant } from '../../helpers/management.js';
import { ISSUE_CSR, REVOKE, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { gql } from '../../helpers/service.js';
import { sleep, waitUntil } from '../../helpers/wait.js';

t.test('connections killed during issuance and revocation: acknowledged = stored whole, failures reported, recovery', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'faults-pki');
  const devices = await Promise.all([0, 1, 2, 3].map((i) => createEntity(ts, admin, { kind: 'device', name: `pki-fault-${i}`, tenantId })));
  const killer = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => killer.end());

  // CSRs made before the storm (openssl is the slow part on a loaded machine), and certificates to revoke.
  const csrs = Array.from({ length: 60 }, () => opensslCsr(ca.dir).csrPem);
  let n = 0;
  const issueOnce = (entityId: string, key = `pki-fault-${n++}`) =>
    gql(ts.url(), ISSUE_CSR, { i: { entityId, csrPem: csrs.pop() ?? opensslCsr(ca.dir).csrPem, idempotencyKey: key } }, admin);
  const toRevoke: string[] = [];
  for (let i = 0; i < 16; i++) {
    const r = await issueOnce(devices[i % devices.length]!);
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
    toRevoke.push(r.body.data!.issueCertificateFromCsrV2.certificate.credentialId);
  }

  let stop = false;
  const issued: string[] = [];
  const revoked: string[] = [];
  const failures = new Map<string, number>();
  const badAnswers: string[] = [];
  const note = (res: Awaited<ReturnType<typeof gql>>, what: string) => {
    if (res.status !== 200) badAnswers.push(`${what}: HTTP ${res.status}`);
    const err = res.body.errors?.[0];
    if (!err) return false;
    if (/\n\s+at /.test(err.message) || err.extensions?.stacktrace) badAnswers.push(`${what}: a stack in ${JSON.stringify(err)}`);
    const key = `${what} ${err.extensions?.code}: ${err.message}`;
    failures.set(key, (failures.get(key) ?? 0) + 1);
    return true;
  };
  const issuer = async (entityId: string) => {
    while (!stop) {
      const res = await issueOnce(entityId);
      if (!note(res, 'issue')) issued.push(res.body.data!.issueCertificateFromCsrV2.certificate.credentialId);
    }
  };
  // Revocations sent and not yet answered: the list of those left is empty while the last one is in flight,
  // and it comes back to the list if that attempt fails.
  let revoking = 0;
  const revoker = async () => {
    while (!stop) {
      const credentialId = toRevoke.shift();
      if (!credentialId) return;
      revoking++;
      const res = await gql(ts.url(), REVOKE, { i: { credentialId, reason: 'key_compromise' } }, admin);
      if (!note(res, 'revoke')) revoked.push(credentialId);
      else toRevoke.push(credentialId); // tried again later, as a client would
      revoking--;
      await sleep(20);
    }
  };

  const workers = [...devices.map(issuer), revoker(), revoker()];
  let kills = 0;
  let issuedAtStormEnd = 0;
  try {
    await waitUntil(() => issued.length > 0 && revoked.length > 0, 20_000, 'issuance and revocation under way');
    for (let i = 0; i < 15; i++) {
      const killed = await killer<{ done: boolean }[]>`select pg_terminate_backend(pid) as done from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`;
      kills += killed.filter((k) => k.done).length;
      await sleep(100);
    }
    issuedAtStormEnd = issued.length;
    await waitUntil(() => issued.length > issuedAtStormEnd, 20_000, 'issuance acknowledged again').catch(() => undefined);
    await waitUntil(() => toRevoke.length === 0 && revoking === 0, 20_000, 'every revocation done').catch(() => undefined);
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  t.comment(`${kills} backends killed; ${issued.length} issued (${issuedAtStormEnd} by the storm's end), ${revoked.length} revoked`);
  t.comment(`failures: ${JSON.stringify([...failures])}`);
  t.ok(kills >= 15, 'the storm killed the service\'s backends');
  t.same(badAnswers, [], 'no HTTP 500 and no stack in any answer');
  t.same([...failures.keys()].filter((k) => !/^(issue|revoke) SERVICE_UNAVAILABLE: /.test(k)), [], 'every failure is SERVICE_UNAVAILABLE (retryable)');
  t.ok(issued.length > issuedAtStormEnd, 'issuance recovered without a restart');
  t.same(toRevoke, [], 'every revocation went through in the end');

  // Acknowledged = stored whole.
  const stored = await killer<{ id: string; status: string; issue_audit: number; issue_outbox: number; ledger: number; revoke_audit: number; revoke_outbox: number }[]>`
    select c.id, c.status,
      (select count(*)::int from audit_log a where a.event = 'certificate.issue' and a.target_id = c.id::text) as issue_audit,
      (select count(*)::int from event_outbox o where o.event = 'certificate.issue' and o.payload->>'credential_id' = c.id::text) as issue_outbox,
      (select count(*)::int from certificate_revocations r where r.issuer_id = c.issuer_id and r.serial_number = c.identifier) as ledger,
      (select count(*)::int from audit_log a where a.event = 'certificate.revoke' and a.target_id = c.id::text) as revoke_audit,
      (select count(*)::int from event_outbox o where o.event = 'certificate.revoke' and o.payload->>'credential_id' = c.id::text) as revoke_outbox
    from credentials c where c.kind = 'certificate' and c.entity_id in ${killer(devices)}`;
  const byId = new Map(stored.map((r) => [r.id, r]));
  t.same(issued.filter((id) => !byId.has(id)), [], `${issued.length} acknowledged issuances, every one stored`);
  t.same(revoked.filter((id) => byId.get(id)?.status !== 'revoked'), [], `${revoked.length} acknowledged revocations, every one stored`);
  const halfIssued = stored.filter((r) => r.issue_audit !== 1 || r.issue_outbox !== 1).map((r) => r.id);
  t.same(halfIssued, [], `${stored.length} certificates stored, each with one issue audit event and one outbox record`);
  const halfRevoked = stored.filter((r) => (r.status === 'revoked') !== (r.ledger === 1 && r.revoke_audit === 1 && r.revoke_outbox === 1)).map((r) => r.id);
  t.same(halfRevoked, [], 'each revoked certificate has one ledger entry, audit event and outbox record; no other has any');
});
