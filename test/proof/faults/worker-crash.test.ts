// Issue 35.2: a worker thread dying mid-signature. The test reaches the service's piscina pool the way an
// operator's fault would, from outside the production code: it wraps Piscina's run() (the same module
// instance the service uses) to note the pool signing, and terminates that pool's threads right after a
// signing task was handed to one. The caller must get a clear, retryable error (not a 500 with a stack),
// piscina must start another thread, the next issuance must work, and nothing may be signed twice: the
// certificates stored are exactly the ones acknowledged, each serial once, and a retry of a failed request
// with its idempotency key issues one certificate.
import { Piscina } from 'piscina';
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant } from '../../helpers/management.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { gql } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';

type Pool = Piscina & { idleThreads: number; threads: { threadId: number; terminate(): Promise<number> }[] };

let signingPool: Pool | undefined;
let armed = false;
const killedThreads = new Set<number>();
const originalRun = Piscina.prototype.run;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
Piscina.prototype.run = function run(this: Pool, task: any, options?: any) {
  // Only a pool whose threads are all up and idle: piscina takes a thread that dies while it is still
  // starting for a module that cannot load, and then starts no thread again (every later task waits for
  // ever). That is a different fault from a crash mid-signature, and not this test's.
  const allReady = this.threads.length > 0 && this.idleThreads === this.threads.length;
  const running = originalRun.call(this, task, options);
  if (task?.task === 'caKeysSign') { // the pool's message: { task, input }
    signingPool = this;
    if (armed && allReady) {
      armed = false;
      // The task was posted to a thread (or queued, if none was free): kill every thread now.
      for (const thread of this.threads) {
        killedThreads.add(thread.threadId);
        void thread.terminate();
      }
    }
  }
  return running;
} as typeof originalRun;
t.teardown(() => { Piscina.prototype.run = originalRun; });

t.test('a worker thread dying mid-signature: a clear error, the thread replaced, nothing signed twice', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, { ...ca.env, SVC_WORKER_THREADS: '1' });
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'faults-worker');
  const deviceId = await createEntity(ts, admin, { kind: 'device', name: 'signer-victim', tenantId });
  let n = 0;
  const issue = (key = `wk-${n++}`) => gql(ts.url(), ISSUE_CSR, { i: { entityId: deviceId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: key } }, admin)
    .then((r) => ({ key, ...r }));

  const first = await issue();
  t.notOk(first.body.errors, 'an issuance before the crash');
  t.ok(signingPool, 'the signing pool was seen');

  const acknowledged: string[] = [first.body.data!.issueCertificateFromCsrV2.certificate.serialNumber];
  const failed: { key: string; code: string; message: string }[] = [];
  // A kill lands either before the thread answers (the calls fail) or just after (they succeed): a few
  // rounds until one failed.
  // The thread may be running another request's CSR reading (pkiReadCsrs) when it dies: that call fails
  // the same way; rounds go on until a signing call was cut.
  const cutSigning = () => failed.some((f) => f.message.includes('during caKeysSign'));
  for (let round = 0; round < 8 && !cutSigning(); round++) {
    await waitUntil(() => signingPool!.threads.length > 0 && signingPool!.idleThreads === signingPool!.threads.length, 10_000, 'the pool ready');
    armed = true;
    const results = await Promise.all([issue(), issue(), issue()]);
    for (const r of results) {
      t.equal(r.status, 200, 'GraphQL answers 200 with an error entry, not a 500');
      if (r.body.errors) failed.push({ key: r.key, code: r.body.errors[0].extensions?.code, message: r.body.errors[0].message });
      else acknowledged.push(r.body.data!.issueCertificateFromCsrV2.certificate.serialNumber);
    }
  }
  t.comment(`killed threads ${[...killedThreads].join(', ')}; acknowledged ${acknowledged.length}; failed ${JSON.stringify(failed)}`);
  t.ok(cutSigning(), 'a signing call was cut by its thread dying');
  for (const f of failed) {
    t.equal(f.code, 'SERVICE_UNAVAILABLE', 'retryable: SERVICE_UNAVAILABLE');
    t.match(f.message, /^worker thread exited during (caKeysSign|pkiReadCsrs); nothing was done, retry$/, 'says what happened');
    t.notMatch(f.message, /\n\s+at /, 'no stack in the answer');
  }

  // Replaced: piscina runs threads again, none of them a killed one, and the next issuance works.
  await waitUntil(() => signingPool!.threads.length > 0, 10_000, 'the pool has a thread again');
  const after = await issue();
  t.notOk(after.body.errors, 'the next issuance works');
  acknowledged.push(after.body.data!.issueCertificateFromCsrV2.certificate.serialNumber);
  t.notOk(signingPool!.threads.some((thread) => killedThreads.has(thread.threadId)), 'the threads now running are new ones');

  // A failed request retried with its idempotency key: one certificate, and a replay of it is a replay.
  const retry = await issue(failed[0]!.key);
  t.notOk(retry.body.errors, 'the failed request succeeds when retried');
  t.equal(retry.body.data!.issueCertificateFromCsrV2.idempotentReplay, false, 'it had not been issued before');
  acknowledged.push(retry.body.data!.issueCertificateFromCsrV2.certificate.serialNumber);

  const rows = await ts.service.sql<{ identifier: string }[]>`
    select identifier from credentials where kind = 'certificate' and entity_id = ${deviceId}`;
  t.same(rows.map((r) => r.identifier).sort(), [...acknowledged].sort(), 'stored = acknowledged: nothing signed and kept for a failed call');
  t.equal(new Set(rows.map((r) => r.identifier)).size, rows.length, 'each serial once');
  const [audit] = await ts.service.sql<{ n: number }[]>`
    select count(*)::int as n from audit_log a join credentials c on c.id::text = a.target_id
    where a.event = 'certificate.issue' and c.entity_id = ${deviceId}`;
  t.equal(audit!.n, acknowledged.length, 'one issue event per acknowledged certificate');
});
