// The certificates query's filters (SPEC.md "Certificates"): status (active, revoked, expired: a live
// certificate past notAfter), expiresFrom and expiresBefore (notAfter in [from, before)), combined with
// entityId and with paging; bad values are refused naming the argument.
import t from 'tap';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import { ISSUE_CSR, REVOKE, makeCaFiles, opensslCsr } from '../../helpers/pki.js';

const LIST = `query ($e: ID, $s: String, $from: String, $before: String, $limit: Int) {
  certificates(entityId: $e, status: $s, expiresFrom: $from, expiresBefore: $before, limit: $limit) { total items { credentialId status expiresAt } } }`;

t.test('certificates: status, expiresFrom and expiresBefore', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const admin = await adminToken(ts);
  const tenantId = await createTenant(ts, admin, 'filters');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'meter', tenantId });
  const issue = async (ttlSecs: number, key: string) => (await ok(ts, admin, ISSUE_CSR, {
    i: { entityId: device, csrPem: opensslCsr(ca.dir).csrPem, ttlSecs, idempotencyKey: key },
  })).issueCertificateFromCsrV2.certificate.credentialId as string;
  const day = 86_400;
  const short = await issue(day, 'short');
  const medium = await issue(3 * day, 'medium');
  const long = await issue(10 * day, 'long');
  const revoked = await issue(5 * day, 'revoked');
  await ok(ts, admin, REVOKE, { i: { credentialId: revoked } });
  // Expired: a certificate whose notAfter has passed (moved back in the record; nothing else reads it here).
  const expired = await issue(day, 'expired');
  await ts.service.sql`update credentials set expires_at = now() - interval '1 hour' where id = ${expired}`;

  const ids = async (vars: Record<string, unknown>) => {
    const page = (await ok(ts, admin, LIST, { e: device, ...vars })).certificates;
    return { total: page.total as number, ids: (page.items as { credentialId: string }[]).map((i) => i.credentialId).sort() };
  };
  const sorted = (...xs: string[]) => [...xs].sort();
  const at = (secs: number) => new Date(Date.now() + secs * 1000).toISOString();

  t.same(await ids({}), { total: 5, ids: sorted(short, medium, long, revoked, expired) }, 'no filter: all five');
  t.same(await ids({ s: 'active' }), { total: 3, ids: sorted(short, medium, long) }, 'active: live and unexpired');
  t.same(await ids({ s: 'revoked' }), { total: 1, ids: [revoked] });
  t.same(await ids({ s: 'expired' }), { total: 1, ids: [expired] }, 'expired: not revoked, past notAfter');
  t.same(await ids({ before: at(2 * day) }), { total: 2, ids: sorted(short, expired) }, 'expiresBefore: notAfter before it');
  t.same(await ids({ from: at(2 * day) }), { total: 3, ids: sorted(medium, long, revoked) }, 'expiresFrom: notAfter at or after it');
  t.same(await ids({ from: at(2 * day), before: at(7 * day) }), { total: 2, ids: sorted(medium, revoked) }, 'a window');
  t.same(await ids({ s: 'active', from: at(2 * day), before: at(7 * day) }), { total: 1, ids: [medium] }, 'status and window together');
  const firstPage = (await ok(ts, admin, LIST, { e: device, s: 'active', limit: 2 })).certificates;
  t.equal(firstPage.total, 3, 'the total counts the filtered rows, not the page');
  t.equal(firstPage.items.length, 2);

  t.match((await fails(ts, admin, LIST, { e: device, s: 'valid' }))[0]!.message, /status/, 'an unknown status is refused naming it');
  t.match((await fails(ts, admin, LIST, { e: device, from: 'tomorrow' }))[0]!.message, /expiresFrom/, 'a bad time is refused naming it');
});
