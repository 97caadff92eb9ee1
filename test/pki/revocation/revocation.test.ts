// Revocation: by each selector (credential id, SHA-256 fingerprint, issuer + serial), replays, the
// append-only ledger with each entry's CRL DER, the NOTIFY every instance hears, revoking an entity's
// certificates, bulk revocation resumed from its cursor over a snapshot (tenant, issuer, principal group),
// and the cascades: tenant deletion (not undone by restore, ledger kept through purge) and entity deletion.
import { AsnConvert } from '@peculiar/asn1-schema';
import { CRLReason, RevokedCertificate, id_ce_cRLReasons } from '@peculiar/asn1-x509';
import t from 'tap';
import { REVOKED_TOPIC } from '../../../src/pki/index.js';
import { adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import { CERT_FIELDS, ISSUE_CSR, REVOKE, makeCaFiles, opensslCsr } from '../../helpers/pki.js';
import { waitUntil } from '../../helpers/wait.js';

const BULK = `mutation ($i: BulkRevokeCertificatesInput!) { bulkRevokeCertificates(input: $i) {
  snapshotAt nextCursor complete items { credentialId issuerId entityId tenantId outcome errorCode } } }`;
const CERT = `query ($id: ID!) { certificate(credentialId: $id) { ${CERT_FIELDS} } }`;

t.test('revocation', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, ca.env);
  const admin = await adminToken(ts);
  const sql = ts.service.sql;
  const tenantId = await createTenant(ts, admin, 'acme');
  const deviceA = await createEntity(ts, admin, { kind: 'device', name: 'a', tenantId });
  const deviceB = await createEntity(ts, admin, { kind: 'device', name: 'b', tenantId });
  let n = 0;
  const issue = async (entityId: string) =>
    (await ok(ts, admin, ISSUE_CSR, { i: { entityId, csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `k${n++}` } })).issueCertificateFromCsrV2.certificate;
  const notices: { issuerId: string; serialNumber: string }[] = [];
  ts.service.hub.subscribe(REVOKED_TOPIC, (p) => notices.push(...((p as { revoked?: typeof notices }).revoked ?? [])));

  await t.test('by credential id, by fingerprint, by issuer and serial', async (t) => {
    const [c1, c2, c3] = [await issue(deviceA), await issue(deviceA), await issue(deviceA)];
    const r1 = (await ok(ts, admin, REVOKE, { i: { credentialId: c1.credentialId, reason: 'key_compromise' } })).revokeCertificateV2;
    t.match(r1, { reason: 'key_compromise', actorEntityId: '00000000-0000-0000-0000-000000000001', idempotentReplay: false });
    t.match(r1.certificate, { credentialId: c1.credentialId, status: 'revoked', revocationReason: 'key_compromise' });
    const colons = c2.fingerprintSha256.toUpperCase().match(/../g).join(':');
    const r2 = (await ok(ts, admin, REVOKE, { i: { fingerprintSha256: colons, reason: 'superseded' } })).revokeCertificateV2;
    t.equal(r2.certificate.credentialId, c2.credentialId, 'a fingerprint written with colons and capitals is found');
    const r3 = (await ok(ts, admin, REVOKE, { i: { issuerId: c3.issuerId, serialNumber: c3.serialNumber.toUpperCase() } })).revokeCertificateV2;
    t.match(r3, { reason: 'unspecified', idempotentReplay: false });
    t.equal(r3.certificate.credentialId, c3.credentialId);

    const replay = (await ok(ts, admin, REVOKE, { i: { credentialId: c1.credentialId, reason: 'unspecified' } })).revokeCertificateV2;
    t.match(replay, { idempotentReplay: true, reason: 'key_compromise', revokedAt: r1.revokedAt }, 'a second revocation reports the first');
    t.equal((await ok(ts, admin, CERT, { id: c1.credentialId })).certificate.status, 'revoked');

    const ledger = await sql`select * from certificate_revocations where credential_id = ${c1.credentialId}`;
    t.equal(ledger.length, 1, 'one ledger entry, the replay added none');
    const entry = AsnConvert.parse(ledger[0]!.crl_entry, RevokedCertificate);
    t.equal(Buffer.from(entry.userCertificate).toString('hex'), c1.serialNumber, 'the CRL entry names the serial');
    t.equal(entry.revocationDate.getTime().toISOString(), r1.revokedAt, 'and the revocation time');
    const reason = entry.crlEntryExtensions?.find((e) => e.extnID === id_ce_cRLReasons);
    t.equal(AsnConvert.parse(reason!.extnValue, CRLReason).reason, 1, 'reasonCode keyCompromise (1)');
    const unspecified = AsnConvert.parse((await sql`select crl_entry from certificate_revocations where credential_id = ${c3.credentialId}`)[0]!.crl_entry, RevokedCertificate);
    t.equal(unspecified.crlEntryExtensions, undefined, 'no reasonCode for unspecified (RFC 5280 5.3.1)');
    t.match(ledger[0], { issuer_id: c1.issuerId, serial_number: c1.serialNumber, entity_id: deviceA, tenant_id: tenantId, reason: 'key_compromise' });

    await waitUntil(() => [c1, c2, c3].every((c) => notices.some((x) => x.serialNumber === c.serialNumber && x.issuerId === c.issuerId)), 5000, 'NOTIFY of each revocation');
    const audit = await sql`select count(*)::int as n from audit_log where event = 'certificate.revoke' and target_id = any(${[c1.credentialId, c2.credentialId, c3.credentialId]})`;
    t.equal(audit[0]!.n, 3);
    const outbox = await sql`select count(*)::int as n from event_outbox where event = 'certificate.revoke' and payload ->> 'credential_id' = any(${[c1.credentialId, c2.credentialId, c3.credentialId]})`;
    t.equal(outbox[0]!.n, 3);
  });

  await t.test('selectors and reasons are checked', async (t) => {
    const c = await issue(deviceA);
    const msg = async (i: object) => (await fails(ts, admin, REVOKE, { i }))[0]!.message;
    t.match(await msg({}), 'give exactly one of credentialId, fingerprintSha256, or issuerId with serialNumber');
    t.match(await msg({ credentialId: c.credentialId, fingerprintSha256: c.fingerprintSha256 }), 'give exactly one of');
    t.match(await msg({ issuerId: c.issuerId }), 'issuerId and serialNumber go together');
    t.match(await msg({ credentialId: c.credentialId, reason: 'certificate_hold' }), 'reason must be one of unspecified, key_compromise, ca_compromise');
    t.match(await msg({ fingerprintSha256: 'abc' }), 'fingerprintSha256 must be 64 hex digits');
    t.equal((await fails(ts, admin, REVOKE, { i: { issuerId: c.issuerId, serialNumber: '01' } }))[0]!.extensions.code, 'NOT_FOUND');
  });

  await t.test('the ledger is append-only', async (t) => {
    const upd = await sql`update certificate_revocations set reason = 'unspecified'`.catch((e: Error) => e);
    t.match(String(upd), 'append-only');
    const del = await sql`delete from certificate_revocations`.catch((e: Error) => e);
    t.match(String(del), 'append-only');
    const trunc = await sql`truncate certificate_revocations`.catch((e: Error) => e);
    t.match(String(trunc), 'append-only');
    const [c] = await sql`select id from credentials where kind = 'certificate' and status = 'active' limit 1`;
    const bypass = await sql`update credentials set status = 'revoked', revoked_at = now() where id = ${c!.id}`.catch((e: Error) => e);
    t.match(String(bypass), 'was revoked without a revocation ledger entry', 'no path revokes a certificate around the ledger');
  });

  await t.test('revokeEntityCertificates', async (t) => {
    const d = await createEntity(ts, admin, { kind: 'device', name: 'many', tenantId });
    await issue(d);
    await issue(d);
    const done = await ok(ts, admin, 'mutation ($e: ID!) { revokeEntityCertificates(entityId: $e, reason: "privilege_withdrawn") }', { e: d });
    t.equal(done.revokeEntityCertificates, 2);
    t.equal((await ok(ts, admin, 'mutation ($e: ID!) { revokeEntityCertificates(entityId: $e) }', { e: d })).revokeEntityCertificates, 0);
    const reasons = await sql`select reason from certificate_revocations where entity_id = ${d}`;
    t.same(reasons.map((r) => r.reason), ['privilege_withdrawn', 'privilege_withdrawn']);
  });

  await t.test('bulk revocation by tenant, resumed from its cursor over a snapshot', async (t) => {
    const bulkTenant = await createTenant(ts, admin, 'bulk');
    const d1 = await createEntity(ts, admin, { kind: 'device', name: 'b1', tenantId: bulkTenant });
    const d2 = await createEntity(ts, admin, { kind: 'device', name: 'b2', tenantId: bulkTenant });
    const ids = [];
    for (let i = 0; i < 7; i++) ids.push((await issue(i % 2 ? d1 : d2)).credentialId);
    const revokedEarlier = ids[5]!;
    await ok(ts, admin, REVOKE, { i: { credentialId: revokedEarlier } });
    t.match((await fails(ts, admin, BULK, { i: {} }))[0]!.message, 'give exactly one scope: tenantId, issuerId or principalGroupId');
    t.match((await fails(ts, admin, BULK, { i: { tenantId: bulkTenant, issuerId: bulkTenant } }))[0]!.message, 'give exactly one scope');
    // A page of none revokes none: 0 (once read as 1) and negatives are refused naming limit, nothing written.
    for (const limit of [0, -5]) {
      const [err] = await fails(ts, admin, BULK, { i: { tenantId: bulkTenant, limit } });
      t.match(err, { message: /^limit must be a whole number from 1 to 1000/, extensions: { code: 'BAD_REQUEST' } }, `limit ${limit} refused`);
    }
    t.equal((await sql`select count(*)::int as n from credentials where id = any(${ids}) and status = 'revoked'`)[0]!.n, 1, 'only the one revoked before');

    const p1 = (await ok(ts, admin, BULK, { i: { tenantId: bulkTenant, reason: 'cessation_of_operation', limit: 3 } })).bulkRevokeCertificates;
    t.equal(p1.items.length, 3);
    t.equal(p1.complete, false);
    t.ok(p1.nextCursor);
    t.ok(p1.items.every((i: any) => i.outcome === 'revoked' && i.tenantId === bulkTenant && i.errorCode === null));
    // Issued after the snapshot: not part of this revocation.
    const late = (await issue(d1)).credentialId;
    const seen = [...p1.items];
    let cursor = p1.nextCursor;
    let pages = 1;
    while (cursor) {
      const page = (await ok(ts, admin, BULK, { i: { tenantId: bulkTenant, limit: 3, afterCredentialId: cursor, snapshotAt: p1.snapshotAt } })).bulkRevokeCertificates;
      t.equal(page.snapshotAt, p1.snapshotAt);
      seen.push(...page.items);
      cursor = page.nextCursor;
      pages++;
      if (page.complete) t.equal(cursor, null);
    }
    t.ok(pages >= 2, 'resumed from the cursor');
    const byId = new Map(seen.map((i) => [i.credentialId, i.outcome]));
    const expected = ids.filter((id) => id !== revokedEarlier);
    t.same([...byId.keys()].sort(), expected.sort(), 'every certificate active at the snapshot, once (one revoked before is not listed)');
    t.equal(seen.length, expected.length, 'no certificate twice');
    t.ok(expected.every((id) => byId.get(id) === 'revoked'));
    t.notOk(byId.has(late), 'a certificate issued after the snapshot is left alone');
    t.equal((await ok(ts, admin, CERT, { id: late })).certificate.status, 'active');
    const statuses = await sql`select status, count(*)::int as n from credentials where id = any(${ids}) group by status`;
    t.same(statuses.map((r) => [r.status, r.n]), [['revoked', 7]]);
  });

  await t.test('bulk revocation by issuer and by principal group', async (t) => {
    const other = await createTenant(ts, admin, 'by-issuer');
    const d = await createEntity(ts, admin, { kind: 'device', name: 'i1', tenantId: other });
    const c = await issue(d);
    const r = (await ok(ts, admin, BULK, { i: { issuerId: c.issuerId } })).bulkRevokeCertificates;
    t.same(r.items.map((i: any) => [i.credentialId, i.outcome]), [[c.credentialId, 'revoked']]);
    t.equal(r.complete, true);

    const g = await createTenant(ts, admin, 'by-group');
    const member = await createEntity(ts, admin, { kind: 'device', name: 'g1', tenantId: g });
    const outsider = await createEntity(ts, admin, { kind: 'device', name: 'g2', tenantId: g });
    const [group] = await sql<{ id: string }[]>`insert into groups (name, tenant_id, group_type) values ('fleet', ${g}, 'principal') returning id`;
    await sql`insert into principal_group_members (group_id, entity_id) values (${group!.id}, ${member})`;
    const mc = await issue(member);
    const oc = await issue(outsider);
    const gr = (await ok(ts, admin, BULK, { i: { principalGroupId: group!.id, reason: 'affiliation_changed' } })).bulkRevokeCertificates;
    t.same(gr.items.map((i: any) => i.credentialId), [mc.credentialId]);
    t.equal((await ok(ts, admin, CERT, { id: oc.credentialId })).certificate.status, 'active', 'non-members keep theirs');
    t.equal((await fails(ts, admin, BULK, { i: { principalGroupId: tenantId } }))[0]!.extensions.code, 'NOT_FOUND');
  });

  await t.test('deleting a tenant revokes its certificates; restoring does not reinstate them; purge keeps the ledger', async (t) => {
    const gone = await createTenant(ts, admin, 'gone');
    const d = await createEntity(ts, admin, { kind: 'device', name: 'x', tenantId: gone });
    const [c1, c2] = [await issue(d), await issue(d)];
    await ok(ts, admin, 'mutation ($id: ID!) { deleteTenant(id: $id) }', { id: gone });
    const rows = await sql`select status, revocation_reason from credentials where id = any(${[c1.credentialId, c2.credentialId]})`;
    t.same(rows.map((r) => [r.status, r.revocation_reason]), [['revoked', 'cessation_of_operation'], ['revoked', 'cessation_of_operation']]);
    const ledger = await sql`select count(*)::int as n from certificate_revocations where tenant_id = ${gone}`;
    t.equal(ledger[0]!.n, 2, 'each has its ledger entry');
    await waitUntil(() => notices.some((x) => x.serialNumber === c1.serialNumber), 5000, 'NOTIFY of the cascade');
    await ok(ts, admin, 'mutation ($id: ID!) { restoreTenant(id: $id) { id } }', { id: gone });
    const after = await sql`select count(*)::int as n from credentials where id = any(${[c1.credentialId, c2.credentialId]}) and status = 'active'`;
    t.equal(after[0]!.n, 0, 'restore reinstates nothing');
    await ok(ts, admin, 'mutation ($id: ID!) { deleteTenant(id: $id) }', { id: gone });
    await ok(ts, admin, 'mutation ($id: ID!) { purgeTenant(id: $id) }', { id: gone });
    t.equal((await sql`select count(*)::int as n from pki_authorities where tenant_id = ${gone}`)[0]!.n, 0, 'the tenant\'s authorities are purged');
    t.equal((await sql`select count(*)::int as n from certificate_revocations where tenant_id = ${gone}`)[0]!.n, 2, 'the ledger survives the purge');
  });

  await t.test('deleting an entity revokes its certificates through the ledger', async (t) => {
    const d = await createEntity(ts, admin, { kind: 'device', name: 'to-delete', tenantId });
    const c = await issue(d);
    await ok(ts, admin, 'mutation ($id: ID!) { deleteEntity(id: $id) }', { id: d });
    const [row] = await sql`select status from credentials where id = ${c.credentialId}`;
    t.equal(row!.status, 'revoked');
    const [entry] = await sql`select reason from certificate_revocations where credential_id = ${c.credentialId}`;
    t.equal(entry!.reason, 'cessation_of_operation');
  });
});
