// Two instances on one database: an authority change made on one reaches the other's cached issuers
// through NOTIFY (pki.changed), so it issues from the new version at once; revocations made on one are
// announced to both (pki.revoked).
import t from 'tap';
import { CHANGED_TOPIC, REVOKED_TOPIC } from '../../src/pki/index.js';
import { AUTH_ENV, adminToken, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, ok } from '../helpers/management.js';
import { ISSUE_CSR, REVOKE, makeCaFiles, opensslCsr } from '../helpers/pki.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

t.test('authority changes and revocations reach every instance', async (t) => {
  const ca = makeCaFiles(t);
  const one = await startAuthService(t, ca.env);
  const two = await startTestService(t, { ...AUTH_ENV, ...ca.env }, one.db);
  const admin1 = await adminToken(one);
  const admin2 = await adminToken(two);
  const tenantId = await createTenant(one, admin1, 'shared');
  const device = await createEntity(one, admin1, { kind: 'device', name: 'd', tenantId });
  const issueOn = async (ts: typeof one, token: string, key: string) =>
    (await ok(ts, token, ISSUE_CSR, { i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: key } })).issueCertificateFromCsrV2.certificate;

  const before = await issueOn(two, admin2, 'warm');
  const heard: unknown[] = [];
  two.service.hub.subscribe(CHANGED_TOPIC, (p) => heard.push(p));
  const rotated = (await ok(one, admin1, 'mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { authority { id } } }', { t: tenantId }))
    .provisionTenantAuthorityAutomatically.authority.id;
  await waitUntil(() => heard.length > 0, 5000, 'instance two hears the authority change');
  const after = await issueOn(two, admin2, 'after');
  t.not(before.issuerId, rotated);
  t.equal(after.issuerId, rotated, 'instance two issues from the new version, not its cached one');

  const revoked: { serialNumber: string }[] = [];
  two.service.hub.subscribe(REVOKED_TOPIC, (p) => revoked.push(...((p as { revoked?: { serialNumber: string }[] }).revoked ?? [])));
  await ok(one, admin1, REVOKE, { i: { credentialId: after.credentialId } });
  await waitUntil(() => revoked.some((r) => r.serialNumber === after.serialNumber), 5000, 'instance two hears the revocation');
  t.pass('revocation announced across instances');
});
