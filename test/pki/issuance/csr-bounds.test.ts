// CSR bounds (issue 32.6): requests made by `openssl req` with thousands of RDNs, too many RDNs, subject
// attributes or requested extensions are refused before the full parse, naming the limit, on every CSR path
// (GraphQL issuance, native enroll and re-enroll, EST simpleenroll, simplereenroll and serverkeygen), fast,
// and nothing is stored; a request at the limits still issues.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { isAppError } from '../../../src/errors.js';
import { CSR_LIMITS, readCsrDer } from '../../../src/pki/issuance/csr.js';
import { adminToken, login, startAuthService } from '../../helpers/auth.js';
import { curl, curlJson, enrollmentEnv } from '../../helpers/enrollment.js';
import { createEntity, createTenant, fails, ok } from '../../helpers/management.js';
import { ISSUE_CSR, makeCaFiles, opensslCsr } from '../../helpers/pki.js';

const toDer = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
const rdns = (n: number, sep = '/') => Array.from({ length: n }, (_, i) => `${i === 0 ? '/' : sep}OU=u${i}`).join('');

t.test('CSR bounds', async (t) => {
  const ca = makeCaFiles(t);
  const { env, serverCert } = await enrollmentEnv(ca, { SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const ts = await startAuthService(t, env);
  const admin = await adminToken(ts);
  const sql = ts.service.sql;
  const tenantId = await createTenant(ts, admin, 'acme');
  const device = await createEntity(ts, admin, { kind: 'device', name: 'd', tenantId });
  const key = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  const bearer = ['-H', `authorization: Bearer ${(await login(ts, device, key, { kind: 'shared_key' })).token}`];
  const base = `https://127.0.0.1:${ts.service.ports.enrollment}`;

  // The issue's request: 2,500 RDNs in about 53 KB of PEM (under the 64 KB body limit).
  const flood = opensslCsr(ca.dir, { subject: rdns(2500) }).csrPem;
  t.ok(flood.length > 40_000 && flood.length < 65_536, `a ${flood.length}-byte CSR`);
  const hostile = [
    { what: '2,500 RDNs', pem: flood, message: `it holds more than ${CSR_LIMITS.asn1Elements} ASN.1 elements` },
    { what: '65 RDNs', pem: opensslCsr(ca.dir, { subject: rdns(65) }).csrPem, message: `65 subject RDNs, more than the limit of ${CSR_LIMITS.subjectRdns}` },
    { what: '65 attributes in one RDN', pem: multiValued(ca.dir, 65), message: `65 subject attributes, more than the limit of ${CSR_LIMITS.subjectAttributes}` },
    {
      what: '33 extensions', message: `33 requested extensions, more than the limit of ${CSR_LIMITS.extensions}`,
      pem: opensslCsr(ca.dir, { addext: Array.from({ length: 33 }, (_, i) => `1.2.3.${i}=ASN1:NULL`) }).csrPem,
    },
  ];
  const certificates = async () => (await sql`select count(*)::int as n from credentials where kind = 'certificate'`)[0]!.n as number;

  await t.test('refused by the reader, naming the limit; a request at the limits reads', async (t) => {
    for (const h of hostile) {
      try {
        readCsrDer(toDer(h.pem));
        t.fail(`${h.what} read`);
      } catch (err) {
        t.ok(isAppError(err) && err.kind === 'INVALID_INPUT', h.what);
        t.match((err as Error).message, h.message, h.what);
      }
    }
    const atLimits = opensslCsr(ca.dir, { subject: rdns(CSR_LIMITS.subjectRdns), addext: ['subjectAltName=DNS:a.example'] }).csrPem;
    t.equal(readCsrDer(toDer(atLimits)).keyAlgorithm, 'ecdsa-p256', `${CSR_LIMITS.subjectRdns} RDNs are accepted`);
  });

  await t.test('refused on every path, nothing stored', async (t) => {
    const before = await certificates();
    let n = 0;
    for (const h of hostile) {
      const [err] = await fails(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: h.pem, idempotencyKey: `g${n++}` } });
      t.match(err, { message: h.message, extensions: { code: 'BAD_REQUEST' } }, `GraphQL: ${h.what}`);
    }
    // The enrollment listener reads CSRs with the same reader: the flood (the costly one) through each route.
    for (const h of hostile.slice(0, 1)) {
      const native = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: h.pem, idempotency_key: `n${n++}` }, bearer);
      t.equal(native.status, 400, `native enroll: ${h.what}`);
      t.match(native.json.error, h.message);
      const file = path.join(ca.dir, `hostile-${n++}.b64`);
      writeFileSync(file, toDer(h.pem).toString('base64'));
      for (const op of ['simpleenroll', 'serverkeygen']) {
        const r = await curl(`${base}/.well-known/est/${op}`, serverCert, ['-X', 'POST', '-H', 'content-type: application/pkcs10',
          '--data-binary', `@${file}`, '-u', `${device}:${key}`]);
        t.equal(r.status, 400, `EST ${op}: ${h.what}`);
        t.match(r.body, h.message);
      }
    }
    // Re-enrollment presents a certificate the device holds.
    const csr = opensslCsr(ca.dir);
    const held = await curlJson(`${base}/pki/enroll`, serverCert, { csr_pem: csr.csrPem, idempotency_key: 'held' }, bearer);
    t.equal(held.status, 201);
    const certPath = path.join(ca.dir, 'held.pem');
    writeFileSync(certPath, held.json.certificate_pem);
    const tls = ['--cert', certPath, '--key', csr.keyPath];
    const withHeld = await certificates();
    const re = await curlJson(`${base}/pki/reenroll`, serverCert, { csr_pem: flood, idempotency_key: 'r' }, tls);
    t.equal(re.status, 400, 'native re-enroll');
    t.match(re.json.error, hostile[0]!.message);
    const floodFile = path.join(ca.dir, 'flood.b64');
    writeFileSync(floodFile, toDer(flood).toString('base64'));
    const est = await curl(`${base}/.well-known/est/simplereenroll`, serverCert, ['-X', 'POST', '-H', 'content-type: application/pkcs10',
      '--data-binary', `@${floodFile}`, ...tls]);
    t.equal(est.status, 400, 'EST simplereenroll');
    t.match(est.body, hostile[0]!.message);
    t.equal(withHeld, before + 1, 'only the legitimate enrollment was stored');
    t.equal(await certificates(), withHeld, 'no refused request stored anything');
  });

  await t.test('eight such requests at once are refused fast', async (t) => {
    const started = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    const errors = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      fails(ts, admin, ISSUE_CSR, { i: { entityId: device, csrPem: flood, idempotencyKey: `f${i}` } })));
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    const used = process.cpuUsage(cpu);
    t.ok(errors.every(([e]) => e!.message.includes(hostile[0]!.message)), 'all refused naming the limit');
    // Before the bound, asn1js took ~160 ms of CPU per request (4 s for eight on a loaded machine); now a few ms.
    const cpuMs = (used.user + used.system) / 1000;
    t.comment(`eight 2,500-RDN CSRs: ${wallMs.toFixed(0)} ms wall, ${cpuMs.toFixed(0)} ms CPU of this process (service, its workers, client)`);
    // CPU, not wall time: the machine is shared, and the decoding alone cost 1.3 s of CPU before.
    t.ok(cpuMs < 800, `${cpuMs.toFixed(0)} ms of CPU`);
  });
});

/** One RDN of `n` attributes (openssl -multivalue-rdn). */
function multiValued(dir: string, n: number): string {
  const keyPath = path.join(dir, 'mv.key');
  const out = path.join(dir, 'mv.csr');
  execFileSync('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyPath, '-out', out,
    '-multivalue-rdn', '-subj', rdns(n, '+')], { stdio: 'pipe' });
  return readFileSync(out, 'utf8');
}
