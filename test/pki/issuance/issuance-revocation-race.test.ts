// Issuances racing revokeAuthority: a stream of CSR issuances keeps going while a platform administrator
// revokes the tenant's CA, on real PostgreSQL. The revocation revokes every leaf the CA signed, in its own
// transaction; an issuance that read the CA before and wrote after would leave a leaf committed after the
// revocation, active under a revoked CA. The issuance's write reads its issuer FOR SHARE with the predicate
// of an issuing authority, so no interleaving leaves one: every caller gets a certificate (committed before
// the revocation, hence revoked by it) or the clear CONFLICT naming the revocation, never anything else.
import t from 'tap';
import { adminToken, insertEntity, startAuthService } from '../../helpers/auth.js';
import { createTenant, ok } from '../../helpers/management.js';
import { AUTHORITY_FIELDS, ISSUE_CSR, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { gql } from '../../helpers/service.js';

const REVOKE_AUTHORITY = `mutation ($id: ID!) { revokeAuthority(authorityId: $id) { ${AUTHORITY_FIELDS} revokedAt } }`;
/** Rounds (one tenant each), issuances kept in flight, issuances answered before the revocation starts, and after. */
const ROUNDS = 4;
const IN_FLIGHT = 24;
const BEFORE = 30;
const AFTER = 40;

t.test('issuances racing revokeAuthority never leave a leaf under the revoked CA', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const sql = ts.service.sql;
  const admin = await adminToken(ts);
  const { csrPem } = opensslCsr(ca.dir);

  for (let round = 0; round < ROUNDS; round++) {
    const tenantId = await createTenant(ts, admin, `race-${round}`);
    const [authority] = await sql<{ id: string }[]>`select id from pki_authorities where tenant_id = ${tenantId} and status = 'active'`;
    const caId = authority!.id;
    const devices = await Promise.all(Array.from({ length: 8 }, (_, i) => insertEntity(ts, { kind: 'device', name: `d-${round}-${i}`, tenantId })));

    const outcomes: { credentialId?: string; code?: string; message?: string }[] = [];
    let sent = 0;
    let revoked = false;
    let answeredAfter = 0;
    async function issuer(): Promise<void> {
      while (!revoked || answeredAfter < AFTER) {
        const n = sent++;
        const res = await gql(ts.url(), ISSUE_CSR, { i: { entityId: devices[n % devices.length], csrPem, idempotencyKey: `race-${round}-${n}` } }, admin);
        const error = res.body.errors?.[0];
        outcomes.push(error ? { code: error.extensions?.code, message: error.message } : { credentialId: res.body.data!.issueCertificateFromCsrV2.certificate.credentialId });
        if (revoked) answeredAfter++;
      }
    }
    const stream = Promise.all(Array.from({ length: IN_FLIGHT }, issuer));
    while (outcomes.length < BEFORE) await new Promise((r) => setTimeout(r, 5));
    const revocation = (await ok(ts, admin, REVOKE_AUTHORITY, { id: caId })).revokeAuthority;
    revoked = true;
    await stream;

    const issued = outcomes.filter((o) => o.credentialId).map((o) => o.credentialId!);
    const refused = outcomes.filter((o) => !o.credentialId);
    t.ok(issued.length >= BEFORE, `round ${round}: ${issued.length} certificates issued before the revocation, ${refused.length} refused`);
    t.ok(refused.length >= AFTER, `round ${round}: issuances after the revocation are refused`);
    t.same(refused.filter((o) => o.code !== 'CONFLICT' || !/was revoked .*issues nothing/.test(o.message ?? '')), [],
      `round ${round}: every refusal is the CONFLICT naming the revocation`);

    const rows = await sql<{ id: string; status: string; revocation_reason: string | null }[]>`
      select id, status, revocation_reason from credentials where kind = 'certificate' and issuer_id = ${caId}`;
    t.same(rows.filter((r) => r.status !== 'revoked' || r.revocation_reason !== 'ca_compromise'), [],
      `round ${round}: no leaf under the revoked CA was committed after its revocation (each is revoked by it)`);
    t.same(rows.map((r) => r.id).sort(), [...issued].sort(), `round ${round}: a row for each certificate answered, and no other`);
    const [ledger] = await sql<{ n: number }[]>`
      select count(*)::int as n from certificate_revocations where issuer_id = ${caId} and reason = 'ca_compromise'`;
    t.equal(ledger!.n, rows.length, `round ${round}: the CA's revocation ledger lists every leaf (its CRL and OCSP publish them)`);
    t.ok(revocation.revokedAt, `round ${round}: the CA is revoked`);
  }
});
