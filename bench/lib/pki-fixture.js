// The certificate authority the pki-* scenarios run against: an openssl root and platform intermediate in
// a temporary directory (made once per bench process, on first use), a SoftHSM2 token when asked, and
// the setup/teardown they share: a tenant and a device, one `openssl req` CSR (P-256), and the check that
// every acknowledged GraphQL answer really issued a certificate (errors come back with HTTP 200 too).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { adminSession, graphql } from '../scenarios/auth-whoami-anon.js';

const ssl = (/** @type {string[]} */ args) => execFileSync('openssl', args, { stdio: 'pipe' });

/** @type {string | undefined} */
let dir;

function caDir() {
  if (dir) return dir;
  dir = mkdtempSync(path.join(tmpdir(), 'bench-pki-'));
  const made = dir;
  process.once('exit', () => rmSync(made, { recursive: true, force: true }));
  const f = (/** @type {string} */ n) => path.join(/** @type {string} */ (dir), n);
  ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('root.key'), '-out', f('root.pem'),
    '-subj', '/CN=bench root', '-days', '3650', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  writeFileSync(f('int.ext'), 'basicConstraints=critical,CA:TRUE,pathlen:1\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n');
  ssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('int.key'), '-out', f('int.csr'), '-subj', '/CN=bench platform intermediate']);
  ssl(['x509', '-req', '-in', f('int.csr'), '-CA', f('root.pem'), '-CAkey', f('root.key'), '-CAcreateserial', '-days', '730', '-extfile', f('int.ext'), '-out', f('int.pem')]);
  ssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('leaf.key'), '-out', f('leaf.csr'), '-subj', '/CN=bench device']);
  return dir;
}

/** Service env: the admin secret, root and platform intermediate, a key-encryption key, and the backend. */
export function pkiEnv(/** @type {'encrypted_database' | 'pkcs11'} */ backend) {
  const d = caDir();
  /** @type {Record<string, string>} */
  const env = {
    SVC_ADMIN_SECRET: 'bench-admin-secret-0123456789',
    SVC_PKI_ROOT_CERT_PATH: path.join(d, 'root.pem'),
    SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH: path.join(d, 'int.pem'),
    SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH: path.join(d, 'int.key'),
    SVC_PKI_CA_KEY_ENCRYPTION_KEY: readKek(d),
    SVC_PKI_CA_KEY_BACKEND: backend,
  };
  if (backend === 'pkcs11') {
    const tokens = path.join(d, 'tokens');
    mkdirSync(tokens, { recursive: true });
    const conf = path.join(d, 'softhsm2.conf');
    writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`);
    execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'bench', '--pin', '1234', '--so-pin', '87654321'],
      { env: { ...process.env, SOFTHSM2_CONF: conf }, stdio: 'pipe' });
    Object.assign(env, { SOFTHSM2_CONF: conf, SVC_PKI_PKCS11_MODULE_PATH: '/usr/lib/softhsm/libsofthsm2.so', SVC_PKI_PKCS11_TOKEN_LABEL: 'bench', SVC_PKI_PKCS11_USER_PIN: '1234' });
  }
  return env;
}

function readKek(/** @type {string} */ d) {
  const file = path.join(d, 'kek');
  try {
    return readFileSync(file, 'utf8');
  } catch {
    const kek = randomBytes(32).toString('base64');
    writeFileSync(file, kek);
    return kek;
  }
}

/** The one P-256 `openssl req` CSR of the bench CA directory (PEM). */
export const leafCsrPem = () => readFileSync(path.join(caDir(), 'leaf.csr'), 'utf8');

export const ISSUE = 'mutation ($i: IssueCertificateFromCsrV2Input!) { issueCertificateFromCsrV2(input: $i) { idempotentReplay certificate { credentialId serialNumber } } }';

/** A tenant (its intermediate is provisioned on creation) with one device, and the CSR every request sends. */
export async function setupIssuance(/** @type {any} */ ctx) {
  const token = await adminSession(ctx.ports.http);
  // Rounds reuse the running service: each round gets its own tenant.
  const run = randomBytes(4).toString('hex');
  const tenant = (await graphql(ctx.ports.http, 'mutation ($n: String!) { createTenant(input: {name: $n}) { id } }', { n: `bench-pki-${run}` }, token)).createTenant.id;
  const device = (await graphql(ctx.ports.http, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "bench-device", tenantId: $t}) { id } }', { t: tenant }, token)).createEntity.id;
  const csrPem = readFileSync(path.join(caDir(), 'leaf.csr'), 'utf8');
  // One certificate first: proves the chain works before load, and warms the issuer caches.
  await graphql(ctx.ports.http, ISSUE, { i: { entityId: device, csrPem, idempotencyKey: 'bench-first' } }, token);
  return { token, device, csrPem, run };
}

/** Each request a new idempotency key: a new certificate every time. */
export function issuanceRequest(/** @type {any} */ ctx) {
  const head = JSON.stringify({ query: ISSUE }).slice(0, -1);
  return {
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.data.token}` },
    body: (/** @type {number} */ seq, /** @type {number} */ connection) => `${head},"variables":${JSON.stringify({ i: {
      entityId: ctx.data.device, csrPem: ctx.data.csrPem, idempotencyKey: `${ctx.data.run}-${connection}-${seq}`,
    } })}}`,
    expectedStatus: 200,
  };
}

/** Issued certificates against acknowledged answers: a GraphQL error is a 200 too, so it is counted here. */
export async function countIssued(/** @type {any} */ ctx, /** @type {any} */ load) {
  const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select count(*)::int as n from credentials where kind = 'certificate' and entity_id = ${ctx.data.device}`;
    const issued = row.n - 1;
    if (issued < load.acknowledged) console.error(`warning: ${load.acknowledged - issued} acknowledged answers issued no certificate (GraphQL errors)`);
    return { issued, certificatesPerSec: load.requests / load.wallSeconds };
  } finally {
    await sql.end();
  }
}
