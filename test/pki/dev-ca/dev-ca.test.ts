// The development CA (issue 34): a start on a fresh embedded data directory with no PKI settings makes a
// root, a platform intermediate and an enrollment server certificate, and the CA works at once: issuance
// verified by openssl against the trust bundle, EST over curl against the made server certificate, OCSP.
// A restart reuses them; with a configured root, or on DATABASE_URL without asking, nothing is generated.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startService, type Service } from '../../../src/main.js';
import { projectRoot } from '../../../src/paths.js';
import { devCaFiles } from '../../../src/config.js';
import { ensureDevCaFiles } from '../../../src/pki/index.js';
import { AUTH_ENV, ADMIN_SECRET } from '../../helpers/auth.js';
import { createTestDatabase } from '../../helpers/database.js';
import { curl, pkcs7Certs, estCsrFile } from '../../helpers/enrollment.js';
import { makeCaFiles, ISSUE_CSR, REVOKE, AUTHORITIES, opensslCsr } from '../../helpers/pki.js';
import { firstPem, opensslOcsp, sh, tempDir } from '../../helpers/publication.js';
import { capturingLogger, gql, QUIET_LISTENERS, testLogger, type TestService } from '../../helpers/service.js';

const run = promisify(execFile);

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const file = tempDir(t, 'svc-dev-ca-');
const dataDir = path.dirname(file('x'));
const pkiDir = path.join(dataDir, 'pki');
const pgPort = await freePort();
// No DATABASE_URL and no SVC_PKI_* setting: the quick start. Listeners on port 0, enrollment included.
const quickStart = {
  ...QUIET_LISTENERS, ...AUTH_ENV, SVC_RATE_LIMIT_ENABLED: 'false', SVC_DATA_DIR: dataDir, SVC_EMBEDDED_PG_PORT: String(pgPort),
  SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0', SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0', DATABASE_URL: undefined,
};

function asTestService(service: Service): TestService {
  return { service, db: undefined as never, url: (l = 'http') => `http://127.0.0.1:${service.ports[l as keyof Service['ports']]}` };
}

async function adminLogin(ts: TestService): Promise<string> {
  const res = await gql(ts.url(), 'mutation ($i: LoginInput!) { login(input: $i) { token } }', { i: { identifier: 'admin', secret: ADMIN_SECRET } });
  return res.body.data?.login.token as string;
}

async function ok(ts: TestService, token: string, query: string, variables?: Record<string, unknown>) {
  const res = await gql(ts.url(), query, variables, token);
  if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
  return res.body.data as Record<string, any>;
}

const rootsOf = async (ts: TestService, token: string) => ((await ok(ts, token, AUTHORITIES, {})).pkiAuthorities as any[])
  .filter((a) => a.kind === 'root').map((a) => ({ status: a.status, fingerprint: a.fingerprintSha256 as string }));

let firstRootFingerprint = '';

t.test('first start on a fresh embedded data directory: a working CA, EST and OCSP', async (t) => {
  const { log, entries } = capturingLogger();
  const service = await startService(quickStart, { log });
  t.teardown(() => service.stop());
  const ts = asTestService(service);

  const warnings = entries.filter((e) => e.level === 'warn' && /DEVELOPMENT CERTIFICATE AUTHORITY/.test(e.msg));
  t.equal(warnings.length, 1, 'one warning line');
  t.match(warnings[0]?.msg, /created .*SVC_PKI_ROOT_CERT_PATH/, 'says it was made and how to replace it');
  t.same(readdirSync(pkiDir).sort(), ['ca-key-encryption.key', 'enrollment-server.key', 'enrollment-server.pem', 'platform-intermediate.key',
    'platform-intermediate.pem', 'root-ca.key', 'root-ca.pem'], 'its files, under SVC_DATA_DIR/pki');
  t.equal(warnings[0]?.root, path.join(pkiDir, 'root-ca.pem'), 'the line names the files');
  t.equal(statSync(path.join(pkiDir, 'root-ca.key')).mode & 0o077, 0, 'keys are readable by the owner only');
  t.equal(entries.filter((e) => e.msg === 'root certificate loaded').length, 1, 'the root is loaded as if configured');

  const token = await adminLogin(ts);
  const roots = await rootsOf(ts, token);
  t.equal(roots.length, 1);
  firstRootFingerprint = roots[0]!.fingerprint;
  const rootPem = readFileSync(path.join(pkiDir, 'root-ca.pem'), 'utf8');
  const x = await sh('openssl', ['x509', '-noout', '-fingerprint', '-sha256', '-in', path.join(pkiDir, 'root-ca.pem')]);
  t.equal(x.split('=')[1]?.trim().replace(/:/g, '').toLowerCase(), firstRootFingerprint, 'the active root is the file');

  // A device with a shared key, issued a certificate from an openssl CSR over GraphQL.
  const tenant = (await ok(ts, token, 'mutation { createTenant(input: {name: "acme", alias: "acme"}) { id } }')).createTenant.id as string;
  const device = (await ok(ts, token, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "d1", tenantId: $t}) { id } }', { t: tenant })).createEntity.id as string;
  const key = (await ok(ts, token, 'mutation ($d: ID!) { createSharedKey(entityId: $d) { key } }', { d: device })).createSharedKey.key as string;
  const csr = opensslCsr(dataDir);
  const issued = (await ok(ts, token, ISSUE_CSR, { i: { entityId: device, csrPem: csr.csrPem, idempotencyKey: 'first' } })).issueCertificateFromCsrV2;
  const leaf = file('leaf.pem', issued.certificate.certificatePem);
  const chain = file('chain.pem', issued.chainPem);
  const bundle = file('bundle.pem', await (await fetch(`${ts.url()}/certs/trust-bundle.pem`)).text());
  t.ok(readFileSync(bundle, 'utf8').includes(rootPem.trim().split('\n')[1]!), 'the trust bundle holds the development root');
  t.match(await sh('openssl', ['verify', '-CAfile', bundle, '-untrusted', chain, leaf]), /leaf\.pem: OK/, 'openssl verifies the leaf against the trust bundle');

  // OCSP at the issuer's URL, over the HTTP/1.0 listener: good, then revoked.
  const issuer = file('issuer.pem', firstPem(issued.chainPem));
  const pub = `http://127.0.0.1:${service.ports.pki_publication}`;
  t.match(await opensslOcsp(pub, issued.certificate.issuerId, { issuer, cafile: bundle, cert: leaf }), /leaf\.pem: good/, 'OCSP: good');

  // EST over curl, trusting only the development root: the listener's certificate is the made one.
  const est = `https://localhost:${service.ports.enrollment}/.well-known/est/acme`;
  const rootFile = path.join(pkiDir, 'root-ca.pem');
  const cacerts = await curl(`${est}/cacerts`, rootFile);
  t.equal(cacerts.status, 200, 'curl trusts the enrollment listener through the development root');
  const csrFile = await estCsrFile(dataDir);
  const enrolled = await curl(`${est}/simpleenroll`, rootFile, ['-u', `${device}:${key}`, '-H', 'Content-Type: application/pkcs10', '--data-binary', `@${csrFile.file}`]);
  t.equal(enrolled.status, 200, `EST simpleenroll: ${enrolled.body.slice(0, 200)}`);
  const estLeaf = file('est.pem', await pkcs7Certs(dataDir, enrolled.body));
  t.match(await sh('openssl', ['verify', '-CAfile', rootFile, '-untrusted', chain, estLeaf]), /est\.pem: OK/, 'the EST certificate verifies too');
  const { stdout: names } = await run('openssl', ['x509', '-noout', '-ext', 'subjectAltName', '-in', path.join(pkiDir, 'enrollment-server.pem')]);
  t.match(names, /DNS:localhost, IP Address:127\.0\.0\.1/, 'the server certificate names localhost and 127.0.0.1');

  await ok(ts, token, REVOKE, { i: { credentialId: issued.certificate.credentialId, reason: 'key_compromise' } });
  t.match(await opensslOcsp(pub, issued.certificate.issuerId, { issuer, cafile: bundle, cert: leaf }), /leaf\.pem: revoked/, 'OCSP: revoked');
});

t.test('a restart reuses the development CA', async (t) => {
  const before = readFileSync(path.join(pkiDir, 'root-ca.pem'), 'utf8');
  const { log, entries } = capturingLogger();
  const service = await startService(quickStart, { log });
  t.teardown(() => service.stop());
  const ts = asTestService(service);
  t.equal(readFileSync(path.join(pkiDir, 'root-ca.pem'), 'utf8'), before, 'the root file is unchanged');
  const warnings = entries.filter((e) => e.level === 'warn' && /DEVELOPMENT CERTIFICATE AUTHORITY/.test(e.msg));
  t.equal(warnings.length, 1);
  t.match(warnings[0]?.msg, /in use/, 'reused, not made');
  t.equal(entries.filter((e) => /root certificate loaded|platform intermediate loaded/.test(e.msg)).length, 0, 'nothing new to load');
  t.same(await rootsOf(ts, await adminLogin(ts)), [{ status: 'active', fingerprint: firstRootFingerprint }], 'the same root, still the only one');
});

t.test('a configured root wins, and the development CA never replaces it afterwards', async (t) => {
  const ca = makeCaFiles(t, { name: 'operator' });
  // The keys already stored stay sealed by the development CA's key-encryption key: an operator moving to
  // their own root on the same database keeps it (docs/pki.md).
  const kek = { SVC_PKI_CA_KEY_ENCRYPTION_KEY: readFileSync(path.join(pkiDir, 'ca-key-encryption.key'), 'utf8').trim(), SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID: 'dev-ca:v1' };
  const files = readdirSync(pkiDir).map((f) => `${f} ${statSync(path.join(pkiDir, f)).mtimeMs}`);
  const { log, entries } = capturingLogger();
  const service = await startService({ ...quickStart, ...ca.env, ...kek, SVC_PKI_DEV_CA: 'on' }, { log });
  const ts = asTestService(service);
  const roots = await rootsOf(ts, await adminLogin(ts));
  await service.stop();
  t.notOk(entries.some((e) => /DEVELOPMENT CERTIFICATE AUTHORITY/.test(e.msg)), 'no development CA, even asked for');
  t.same(readdirSync(pkiDir).map((f) => `${f} ${statSync(path.join(pkiDir, f)).mtimeMs}`), files, 'nothing generated or rewritten');
  t.equal(roots.filter((r) => r.status === 'active' && r.fingerprint !== firstRootFingerprint).length, 1, 'the configured root is the active one');

  // The operator's root is in the database: starting again without it must not retire it.
  const err = await startService(quickStart, { log: testLogger() }).then((s) => s.stop().then(() => null), (e: Error) => e);
  t.match(err?.message, /holds the root .*operator root CA.* SVC_PKI_ROOT_CERT_PATH is not set/, 'refused, naming the root and the setting');
});

t.test('on DATABASE_URL nothing is generated', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const elsewhere = path.join(dataDir, 'elsewhere');
  const env = { ...QUIET_LISTENERS, ...AUTH_ENV, SVC_RATE_LIMIT_ENABLED: 'false', SVC_DATA_DIR: elsewhere, DATABASE_URL: db.url };
  const plain = await startService(env, { log: testLogger() });
  t.equal(plain.ports.enrollment, undefined, 'no enrollment listener');
  await plain.stop();
  t.notOk(existsSync(path.join(elsewhere, 'pki')), 'no files');
  // SVC_PKI_DEV_CA=on takes the embedded start's path (config.test.ts holds the switch), so it is not started again here.
});

t.test('npm run ca:init writes the same files and prints the settings', async (t) => {
  const dir = path.join(dataDir, 'operator-pki');
  const cli = path.join(projectRoot, 'dist/src/pki/dev-ca/dev-ca-cli.js');
  const first = await run('node', [cli, dir], { env: { PATH: process.env.PATH } });
  t.match(first.stdout, new RegExp(`export SVC_PKI_ROOT_CERT_PATH='${path.join(dir, 'root-ca.pem')}'`));
  t.match(first.stdout, /export SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH=.*\nexport SVC_PKI_CA_KEY_ENCRYPTION_KEY=/);
  t.match(first.stderr, /written to/);
  const root = readFileSync(path.join(dir, 'root-ca.pem'), 'utf8');
  // Run again (in process, the same code the CLI runs: a node start costs seconds on a loaded machine).
  t.same(await ensureDevCaFiles(devCaFiles(dir)), { created: false }, 'run again, it keeps them');
  t.equal(readFileSync(path.join(dir, 'root-ca.pem'), 'utf8'), root, 'the root is unchanged');
  t.match(await sh('openssl', ['verify', '-CAfile', path.join(dir, 'root-ca.pem'), path.join(dir, 'platform-intermediate.pem')]), /OK/);
});
