// CertificateService end to end through a client loaded from the repository's proto, with certificates
// issued by the real issuance path (openssl CSRs, GraphQL issueCertificateFromCsrV2): ResolveCertificateV2
// by each selector, expected_tenant_id, the distinct codes of unknown (NOT_FOUND), revoked
// (FAILED_PRECONDITION) and expired (OUT_OF_RANGE), the callers' grants and tenant isolation, the cache
// (dropped by a revocation before it returns, cleared when the LISTEN connection comes back), and
// RevokeEntityCertificates through the revocation service (ledger, audit, outbox).
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { adminToken, makeTenantAdmin, startAuthService, tokenFor } from '../helpers/auth.js';
import { ok } from '../helpers/management.js';
import { ISSUE_CSR, REVOKE, makeCaFiles, opensslCsr } from '../helpers/pki.js';
import { waitUntil } from '../helpers/wait.js';
import { seedWorld, type World } from '../authz/helpers/world.js';
import { grpcClient, type Reply } from './helpers.js';

const world: World = {
  tenants: { acme: {}, globex: {} },
  entities: {
    sensor: { kind: 'device', tenant: 'acme' },
    spare: { kind: 'device', tenant: 'acme' },
    gsensor: { kind: 'device', tenant: 'globex' },
    acmeAdapter: { kind: 'service', tenant: 'acme' },
    acmeOps: { kind: 'service', tenant: 'acme' },
    platformAdapter: { kind: 'service' },
    nobody: { kind: 'human' },
  },
  resources: {},
  groups: {},
  objectMembers: [],
  principalMembers: [],
  blocks: {
    acmeCheck: { scope: 'tenant', tenant: 'acme', actions: ['authz.check'] },
    platformCheck: { scope: 'platform', actions: ['authz.check'] },
  },
  roles: {},
  assignments: [],
  policies: [
    { block: 'acmeCheck', entity: 'acmeAdapter', tenant: 'acme' },
    { block: 'platformCheck', entity: 'platformAdapter' },
  ],
  credentials: {},
};

const ca = makeCaFiles(t);
const ts = await startAuthService(t, { ...ca.env, SVC_GRPC_ADDR: '127.0.0.1:0' });
const sql = ts.service.sql;
const ids = (await seedWorld(sql as never, world)) as Record<string, string>;
await makeTenantAdmin(ts, ids.acme as string, ids.acmeOps as string);
const admin = await adminToken(ts);
const [acmeAdapter, acmeOps, platformAdapter, nobody] = await Promise.all(
  [ids.acmeAdapter, ids.acmeOps, ids.platformAdapter, ids.nobody].map((id) => tokenFor(ts, id as string))) as [string, string, string, string];

interface Cert { credentialId: string; entityId: string; tenantId: string | null; issuerId: string; serialNumber: string; fingerprintSha256: string; certificatePem: string; expiresAt: string }
let n = 0;
async function issue(entity: string): Promise<Cert> {
  const data = await ok(ts, admin, ISSUE_CSR, { i: { entityId: ids[entity], csrPem: opensslCsr(ca.dir).csrPem, idempotencyKey: `grpc-${n++}` } });
  return data.issueCertificateFromCsrV2.certificate;
}
const derOf = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
const issuerFingerprints = new Map<string, string>();
async function issuerFingerprint(issuerId: string): Promise<string> {
  let fp = issuerFingerprints.get(issuerId);
  if (!fp) issuerFingerprints.set(issuerId, (fp = (await ok(ts, admin, 'query ($id: ID!) { pkiAuthority(id: $id) { fingerprintSha256 } }', { id: issuerId })).pkiAuthority.fingerprintSha256 as string));
  return fp;
}

const client = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`);
t.teardown(() => client.close());
const code = (name: keyof typeof grpc.status) => grpc.status[name];
/** As the platform adapter by default; null: without metadata. */
const resolve = (request: Record<string, unknown>, token: string | null = platformAdapter) =>
  client.call('CertificateService', 'ResolveCertificateV2', request, token === null ? {} : { token });
const revokeEntity = (request: Record<string, unknown>, token: string) => client.call('CertificateService', 'RevokeEntityCertificates', request, { token });
const byFingerprint = (c: Cert) => ({ fingerprint_sha256: c.fingerprintSha256 });
const answerOf = (c: Cert) => ({
  entity_id: c.entityId, tenant_id: c.tenantId ?? '', credential_id: c.credentialId, issuer_id: c.issuerId,
  expires_at: new Date(c.expiresAt).toISOString(), status: 'active',
});
const trailer = (r: Reply, key: string) => r.err?.metadata?.get(key)[0];

const sensorCert = await issue('sensor');
const gsensorCert = await issue('gsensor');

t.test('ResolveCertificateV2 by each selector', async (t) => {
  const want = answerOf(sensorCert);
  t.same((await resolve({ certificate_der: derOf(sensorCert.certificatePem) })).res, want, 'by the leaf DER');
  t.same((await resolve(byFingerprint(sensorCert))).res, want, 'by the SHA-256 fingerprint');
  const colons = sensorCert.fingerprintSha256.toUpperCase().match(/../g)!.join(':');
  t.same((await resolve({ fingerprint_sha256: colons })).res, want, 'a fingerprint with colons and capitals');
  const issuerFp = await issuerFingerprint(sensorCert.issuerId);
  t.same((await resolve({ issuer_fingerprint_sha256: issuerFp, serial_number: sensorCert.serialNumber })).res, want, 'by issuer fingerprint and serial');
  t.same((await resolve({ issuer_fingerprint_sha256: issuerFp, serial_number: `0x${sensorCert.serialNumber.toUpperCase()}` })).res, want, 'a serial written 0x and capitals');
  t.same((await resolve({ certificate_der: derOf(sensorCert.certificatePem), ...byFingerprint(sensorCert), issuer_fingerprint_sha256: issuerFp, serial_number: sensorCert.serialNumber })).res,
    want, 'all three selectors naming the one certificate');
  t.equal(want.tenant_id, ids.acme);
  t.match(want.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'expires_at is RFC 3339');
});

t.test('expected_tenant_id', async (t) => {
  t.same((await resolve({ ...byFingerprint(sensorCert), expected_tenant_id: ids.acme })).res, answerOf(sensorCert), 'the certificate\'s own tenant');
  const other = await resolve({ ...byFingerprint(sensorCert), expected_tenant_id: ids.globex });
  t.match(other, { err: { code: code('NOT_FOUND'), details: 'certificate not found' } }, 'another tenant: refused as unknown');
  t.match(await resolve({ ...byFingerprint(sensorCert), expected_tenant_id: 'acme' }), { err: { code: code('INVALID_ARGUMENT'), details: 'expected_tenant_id must be a UUID' } });
});

t.test('unknown, and selectors that are wrong or disagree', async (t) => {
  const unknown = await resolve({ fingerprint_sha256: randomBytes(32).toString('hex') });
  t.match(unknown, { err: { code: code('NOT_FOUND'), details: 'certificate not found' } }, 'an unknown fingerprint');
  t.equal(trailer(unknown, 'certificate-status'), undefined, 'no certificate-status trailer for an unknown certificate');
  // Version 1 certificate credentials (no issuer) cannot exist, so none can resolve: the schema refuses them.
  const v1 = randomBytes(32).toString('hex');
  await t.rejects(sql`insert into credentials (entity_id, kind, identifier, metadata) values (${ids.sensor!}, 'certificate', '0a', ${sql.json({ fingerprint_sha256: v1 })})`,
    { constraint_name: 'credentials__certificate_has_issuer' } as never, 'a V1 (issuer-less) certificate credential is refused by the schema');
  t.match(await resolve({ fingerprint_sha256: v1 }), { err: { code: code('NOT_FOUND') } });
  // A certificate this service did not issue.
  t.match(await resolve({ certificate_der: derOf((await import('node:fs')).readFileSync(ca.root, 'utf8')) }), { err: { code: code('NOT_FOUND') } }, 'a foreign certificate');
  t.match(await resolve({ certificate_der: Buffer.from('not a certificate') }), { err: { code: code('NOT_FOUND') } }, 'bytes that are no certificate');
  const issuerFp = await issuerFingerprint(sensorCert.issuerId);
  t.match(await resolve({ issuer_fingerprint_sha256: issuerFp, serial_number: 'ff'.repeat(16) }), { err: { code: code('NOT_FOUND') } }, 'an unknown serial of a known issuer');
  t.match(await resolve({ ...byFingerprint(sensorCert), certificate_der: derOf(gsensorCert.certificatePem) }), { err: { code: code('NOT_FOUND') } },
    'selectors naming two certificates');
  t.match(await resolve({}), { err: { code: code('INVALID_ARGUMENT'), details: 'give certificate_der, fingerprint_sha256, or issuer_fingerprint_sha256 with serial_number' } });
  t.match(await resolve({ issuer_fingerprint_sha256: issuerFp }), { err: { code: code('INVALID_ARGUMENT'), details: 'issuer_fingerprint_sha256 and serial_number go together' } });
  t.match(await resolve({ serial_number: sensorCert.serialNumber }), { err: { code: code('INVALID_ARGUMENT') } });
  t.match(await resolve({ fingerprint_sha256: 'abc' }), { err: { code: code('INVALID_ARGUMENT'), details: /^fingerprint_sha256 must be 64 hex digits/ } });
  t.match(await resolve({ issuer_fingerprint_sha256: issuerFp, serial_number: 'xyz' }), { err: { code: code('INVALID_ARGUMENT'), details: 'serial_number must be a hex string' } });
});

t.test('revoked and expired: distinct codes, with a certificate-status trailer', async (t) => {
  const revoked = await issue('spare');
  t.same((await resolve(byFingerprint(revoked))).res, answerOf(revoked), 'active first (now cached)');
  await ok(ts, admin, REVOKE, { i: { credentialId: revoked.credentialId, reason: 'key_compromise' } });
  // No wait: the revoking instance dropped its cached answer before the mutation returned.
  const r = await resolve(byFingerprint(revoked));
  t.match(r, { err: { code: code('FAILED_PRECONDITION'), details: 'certificate revoked' } });
  t.equal(trailer(r, 'certificate-status'), 'revoked');

  const expired = await issue('spare');
  await sql`update credentials set expires_at = now() - interval '1 minute' where id = ${expired.credentialId}`;
  const e = await resolve({ certificate_der: derOf(expired.certificatePem) });
  t.match(e, { err: { code: code('OUT_OF_RANGE'), details: 'certificate expired' } });
  t.equal(trailer(e, 'certificate-status'), 'expired');
  t.not(code('OUT_OF_RANGE'), code('FAILED_PRECONDITION'));
  t.not(code('OUT_OF_RANGE'), code('NOT_FOUND'));
});

t.test('callers: metadata, grants, tenant isolation', async (t) => {
  t.match(await resolve(byFingerprint(sensorCert), null), { err: { code: code('UNAUTHENTICATED'), details: 'missing authorization metadata' } });
  t.match(await client.call('CertificateService', 'ResolveCertificateV2', byFingerprint(sensorCert), { authorization: 'Basic abc' }),
    { err: { code: code('UNAUTHENTICATED'), details: 'expected Bearer token' } });
  t.match(await client.call('CertificateService', 'RevokeEntityCertificates', { entity_id: ids.sensor }), { err: { code: code('UNAUTHENTICATED') } });
  t.match(await resolve(byFingerprint(sensorCert), 'not-a-token'), { err: { code: code('UNAUTHENTICATED') } });

  t.same((await resolve(byFingerprint(sensorCert), acmeAdapter)).res, answerOf(sensorCert), 'authz.check on acme resolves acme\'s certificate');
  t.same((await resolve(byFingerprint(gsensorCert), admin)).res, answerOf(gsensorCert), 'the platform administrator resolves any tenant\'s');
  t.same((await resolve(byFingerprint(gsensorCert), platformAdapter)).res, answerOf(gsensorCert), 'authz.check at platform scope too');

  const foreign = await resolve(byFingerprint(gsensorCert), acmeAdapter);
  const unknown = await resolve({ fingerprint_sha256: randomBytes(32).toString('hex') }, acmeAdapter);
  t.match(foreign, { err: { code: code('NOT_FOUND'), details: 'certificate not found' } }, 'another tenant\'s certificate: as unknown');
  t.same([foreign.err?.code, foreign.err?.details], [unknown.err?.code, unknown.err?.details], 'indistinguishable from an unknown one');
  t.match(await resolve({ ...byFingerprint(gsensorCert), expected_tenant_id: ids.globex }, acmeAdapter), { err: { code: code('PERMISSION_DENIED') } },
    'asking in a tenant it has no grant on: refused before any lookup');

  for (const request of [byFingerprint(sensorCert), byFingerprint(gsensorCert), { fingerprint_sha256: randomBytes(32).toString('hex') }]) {
    t.match(await resolve(request, nobody), { err: { code: code('PERMISSION_DENIED'), details: 'forbidden' } }, 'a caller without the grant is refused, whatever it asks');
  }
  t.match(await revokeEntity({ entity_id: ids.sensor }, nobody), { err: { code: code('PERMISSION_DENIED') } }, 'and cannot revoke');
  t.match(await revokeEntity({ entity_id: ids.gsensor }, acmeOps), { err: { code: code('NOT_FOUND'), details: 'entity not found' } },
    'acme\'s administrator cannot revoke globex\'s certificates: as an unknown entity');
  t.match(await revokeEntity({ entity_id: ids.sensor }, acmeAdapter), { err: { code: code('PERMISSION_DENIED') } },
    'authz.check alone does not revoke: the revocation service wants credential manage, as for GraphQL');
  t.same((await resolve(byFingerprint(gsensorCert))).res, answerOf(gsensorCert), 'nothing was revoked by the refused calls');
  t.same((await resolve(byFingerprint(sensorCert))).res, answerOf(sensorCert));
});

t.test('RevokeEntityCertificates: the revocation service (ledger, audit, outbox), then resolve answers revoked', async (t) => {
  const second = await issue('sensor');
  for (const c of [sensorCert, second]) t.same((await resolve(byFingerprint(c), acmeAdapter)).res, answerOf(c), 'cached as active');
  t.match(await revokeEntity({ entity_id: ids.sensor, reason: 'decommissioned' }, acmeOps), { err: { code: code('INVALID_ARGUMENT'), details: /^reason must be one of/ } });
  t.match(await revokeEntity({ entity_id: 'sensor' }, acmeOps), { err: { code: code('INVALID_ARGUMENT'), details: 'entity_id must be a UUID' } });
  t.match(await revokeEntity({ entity_id: '00000000-0000-4000-8000-000000000000' }, acmeOps), { err: { code: code('NOT_FOUND'), details: 'entity not found' } });

  t.same(await revokeEntity({ entity_id: ids.sensor, reason: 'key_compromise' }, acmeOps), { err: null, res: { revoked: '2' } });
  for (const c of [sensorCert, second]) {
    const r = await resolve(byFingerprint(c), acmeAdapter);
    t.match(r, { err: { code: code('FAILED_PRECONDITION'), details: 'certificate revoked' } }, 'revoked at once on this instance');
    const ledger = await sql`select reason, actor_entity_id, tenant_id from certificate_revocations where credential_id = ${c.credentialId}`;
    t.same(ledger, [{ reason: 'key_compromise', actor_entity_id: ids.acmeOps, tenant_id: ids.acme }], 'a ledger entry');
    const audit = await sql`select actor_entity_id, details ->> 'via' as via from audit_log where event = 'certificate.revoke' and target_id = ${c.credentialId}`;
    t.same(audit, [{ actor_entity_id: ids.acmeOps, via: 'grpc' }], 'an audit event naming the gRPC caller');
    const outbox = await sql`select payload ->> 'reason' as reason from event_outbox where event = 'certificate.revoke' and payload ->> 'credential_id' = ${c.credentialId}`;
    t.same(outbox, [{ reason: 'key_compromise' }], 'an outbox record');
  }
  const status = await ok(ts, admin, 'query ($id: ID!) { certificate(credentialId: $id) { status revocationReason } }', { id: second.credentialId });
  t.same(status.certificate, { status: 'revoked', revocationReason: 'key_compromise' }, 'GraphQL sees the same revocation');
  t.same((await revokeEntity({ entity_id: ids.sensor }, acmeOps)).res, { revoked: '0' }, 'nothing left to revoke');
  // spare holds one revoked certificate and one past its expiry but never revoked: that one is revoked, as GraphQL would.
  t.same((await revokeEntity({ entity_id: ids.spare }, admin)).res, { revoked: '1' }, 'the platform administrator revokes in any tenant');
});

t.test('a lost LISTEN connection clears the cache on reconnect', async (t) => {
  const cert = await issue('spare');
  t.same((await resolve(byFingerprint(cert))).res, answerOf(cert), 'resolved and cached');
  // Changed behind the service's back (no NOTIFY), as if a revocation notice were lost with the connection
  // (a revocation itself cannot be written without its ledger entry, which announces it).
  await sql`update credentials set expires_at = now() - interval '1 minute' where id = ${cert.credentialId}`;
  t.same((await resolve(byFingerprint(cert))).res, answerOf(cert), 'still answered from the cache: no notice came');
  const hub = ts.service.hub;
  const before = hub.reconnects;
  await sql`select pg_terminate_backend(${hub.backendPid!})`;
  await waitUntil(() => hub.reconnects > before, 10_000, 'the LISTEN connection is re-established');
  t.match(await resolve(byFingerprint(cert)), { err: { code: code('OUT_OF_RANGE'), details: 'certificate expired' } }, 'the cache was cleared on reconnect');
});

// ---- the wire: raw protobuf bytes at the upstream method paths, read back by field number ----

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}
/** Length-delimited fields (strings, bytes) by number. */
const encode = (fields: [number, Buffer | string][]) =>
  Buffer.concat(fields.flatMap(([num, value]) => {
    const bytes = Buffer.isBuffer(value) ? value : Buffer.from(value);
    return [varint((num << 3) | 2), varint(bytes.length), bytes];
  }));
function decode(buf: Buffer): Map<number, string> {
  const out = new Map<number, string>();
  let at = 0;
  const read = () => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const byte = buf[at++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      if (!(byte & 0x80)) return value;
      shift += 7;
    }
  };
  while (at < buf.length) {
    const tag = read();
    if ((tag & 7) === 0) out.set(tag >> 3, String(read()));
    else {
      const len = read();
      out.set(tag >> 3, buf.subarray(at, at + len).toString());
      at += len;
    }
  }
  return out;
}

t.test('on the wire: /atom.v1.CertificateService/<Method> with the contract\'s field numbers', async (t) => {
  const raw = new grpc.Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure());
  t.teardown(() => raw.close());
  const call = (path: string, body: Buffer, token = platformAdapter) => new Promise<Reply>((resolve) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, body, md, { deadline: Date.now() + 10_000 }, (err, res) => resolve({ err: err ?? null, res }));
  });
  const RESOLVE = '/atom.v1.CertificateService/ResolveCertificateV2';
  const fresh = await issue('gsensor');
  const issuerFp = await issuerFingerprint(fresh.issuerId);
  const want = answerOf(fresh);
  const answer = new Map([[1, want.entity_id], [2, want.tenant_id], [3, want.credential_id], [4, want.issuer_id], [5, want.expires_at], [6, 'active']]);
  t.same(decode((await call(RESOLVE, encode([[1, derOf(fresh.certificatePem)]]))).res), answer, 'certificate_der = 1; the response fields 1-6');
  t.same(decode((await call(RESOLVE, encode([[2, fresh.fingerprintSha256]]))).res), answer, 'fingerprint_sha256 = 2');
  t.same(decode((await call(RESOLVE, encode([[3, issuerFp], [4, fresh.serialNumber]]))).res), answer, 'issuer_fingerprint_sha256 = 3, serial_number = 4');
  t.match(await call(RESOLVE, encode([[2, fresh.fingerprintSha256], [5, 'not-a-uuid']])), { err: { details: 'expected_tenant_id must be a UUID' } }, 'expected_tenant_id = 5');
  t.same(decode((await call(RESOLVE, encode([[2, fresh.fingerprintSha256], [5, ids.globex!]]))).res), answer);
  t.match(await call('/atom.v1.CertificateService/RevokeEntityCertificates', encode([[1, 'x']])), { err: { details: 'entity_id must be a UUID' } }, 'entity_id = 1');
  t.match(await call('/atom.v1.CertificateService/RevokeEntityCertificates', encode([[1, ids.gsensor!], [2, 'nonsense']]), admin), { err: { details: /^reason must be one of/ } }, 'reason = 2');
  const revoked = await call('/atom.v1.CertificateService/RevokeEntityCertificates', encode([[1, ids.gsensor!], [2, 'superseded']]), admin);
  t.same(decode(revoked.res), new Map([[1, '2']]), 'revoked = 1, a varint');
});

t.test('ResolveCertificate (version 1, removed by the spec): UNIMPLEMENTED, whatever it carries', async (t) => {
  const raw = new grpc.Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure());
  t.teardown(() => raw.close());
  const cert = await issue('sensor');
  // The upstream V1 request: serial_number = 1, fingerprint_sha256 = 2.
  for (const [what, body] of [['serial', encode([[1, cert.serialNumber]])], ['fingerprint', encode([[2, cert.fingerprintSha256]])], ['empty', Buffer.alloc(0)]] as const) {
    const reply = await new Promise<Reply>((resolve) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${platformAdapter}`);
      raw.makeUnaryRequest('/atom.v1.CertificateService/ResolveCertificate', (b: Buffer) => b, (b: Buffer) => b, body, md,
        { deadline: Date.now() + 10_000 }, (err, res) => resolve({ err: err ?? null, res }));
    });
    t.equal(reply.err?.code, code('UNIMPLEMENTED'), `${what}: UNIMPLEMENTED, not an answer`);
  }
});
