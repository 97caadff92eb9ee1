// Two instances on one database: a revocation made through GraphQL on instance one reaches instance two's
// cached ResolveCertificateV2 answers through the 'pki.revoked' NOTIFY (waited for by the notice itself,
// not by a sleep), and instance one's own cache is dropped before its mutation returns.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { REVOKED_TOPIC, type RevokedNotice } from '../../src/pki/index.js';
import { AUTH_ENV, adminToken, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, ok } from '../helpers/management.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr } from '../helpers/pki.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { grpcClient } from './helpers.js';

t.test('a revocation on one instance reaches the other\'s resolution cache', async (t) => {
  const ca = makeCaFiles(t);
  const one = await startAuthService(t, { ...ca.env, SVC_GRPC_ADDR: '127.0.0.1:0' });
  const two = await startTestService(t, { ...AUTH_ENV, ...ca.env, SVC_GRPC_ADDR: '127.0.0.1:0' }, one.db);
  const admin1 = await adminToken(one);
  const admin2 = await adminToken(two);
  const tenantId = await createTenant(one, admin1, 'shared');
  const device = await createEntity(one, admin1, { kind: 'device', name: 'd', tenantId });
  let n = 0;
  const issue = async () => (await ok(one, admin1, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `k${n++}` } }))
    .issueCertificateFromCsrV2.certificate as { credentialId: string; serialNumber: string; fingerprintSha256: string };
  const [x, y] = [await issue(), await issue()];

  const client1 = grpcClient(`127.0.0.1:${one.service.ports.grpc}`);
  const client2 = grpcClient(`127.0.0.1:${two.service.ports.grpc}`);
  t.teardown(() => { client1.close(); client2.close(); });
  const resolveOn = (client: typeof client1, token: string, c: { fingerprintSha256: string }) =>
    client.call('CertificateService', 'ResolveCertificateV2', { fingerprint_sha256: c.fingerprintSha256 }, { token });

  for (const c of [x, y]) {
    t.match(await resolveOn(client2, admin2, c), { err: null, res: { credential_id: c.credentialId, status: 'active' } }, 'instance two: active, cached');
    t.match(await resolveOn(client1, admin1, c), { err: null, res: { credential_id: c.credentialId, status: 'active' } }, 'instance one: active, cached');
  }
  // Proof that instance two answers from its cache: a change no notice announces is not seen there.
  const sql = one.service.sql;
  const expiresAt = (await sql<{ expires_at: Date }[]>`select expires_at from credentials where id = ${x.credentialId}`)[0]!.expires_at;
  await sql`update credentials set expires_at = now() - interval '1 minute' where id = ${x.credentialId}`;
  t.match(await resolveOn(client2, admin2, x), { err: null, res: { status: 'active' } }, 'instance two still answers from its cache');
  await sql`update credentials set expires_at = ${expiresAt} where id = ${x.credentialId}`;

  // Subscribed after the service's own cache handler, so when this one has run, the cache's has too.
  const heard: string[] = [];
  two.service.hub.subscribe(REVOKED_TOPIC, (p) => heard.push(...((p as RevokedNotice).revoked ?? []).map((r) => r.serialNumber)));
  const revoked = await ok(one, admin1, 'mutation ($e: ID!) { revokeEntityCertificates(entityId: $e, reason: "key_compromise") }', { e: device });
  t.equal(revoked.revokeEntityCertificates, 2);
  // Instance one, at once: its cache was dropped before the mutation returned.
  for (const c of [x, y]) t.match(await resolveOn(client1, admin1, c), { err: { code: grpc.status.FAILED_PRECONDITION, details: 'certificate revoked' } }, 'instance one: revoked at once');

  await waitUntil(() => [x, y].every((c) => heard.includes(c.serialNumber)), 10_000, 'instance two hears pki.revoked');
  for (const c of [x, y]) t.match(await resolveOn(client2, admin2, c), { err: { code: grpc.status.FAILED_PRECONDITION, details: 'certificate revoked' } }, 'instance two: revoked');
});
