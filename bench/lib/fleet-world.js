// Owns the world of the pki-fleet scenario (issue 33.5): a service with the enrollment listener, gRPC and
// the publication listener on, its tenants provisioned through the real path (GraphQL createTenant, whose
// hook provisions the tenant CA: a P-256 key sealed in the database, a certificate signed by the platform
// intermediate, audit event, in one transaction), and one probe tenant whose CA, leaves, OCSP requests and
// client certificates the figures use. Everything a figure sends is made here, before any window.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import postgres from 'postgres';
import { startCpuWindow } from './cpu.js';
import { GRPC_BENCH_ENV, seedAdapterWorld } from './grpc-bench.js';
import { ISSUE, pkiEnv } from './pki-fixture.js';
import { startService } from './service.js';
import { adminSession, graphql } from '../scenarios/auth-whoami-anon.js';

const ssl = (/** @type {string[]} */ args) => execFileSync('openssl', args, { stdio: 'pipe' });
const ISSUE_PEM = ISSUE.replace('certificate { credentialId serialNumber }', 'chainPem certificate { credentialId serialNumber issuerId certificatePem }');
const firstPem = (/** @type {string} */ pem) => /** @type {string} */ (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/)?.[0]);

/** The database a service runs on (its backends are the PostgreSQL CPU counted for it). */
export const databaseOf = (/** @type {{databaseUrl: string}} */ s) => new URL(s.databaseUrl).pathname.slice(1);

/** CPU roots and options of one service: its process tree and the backends of its own database. */
export const cpuOf = (/** @type {{pid: number, databaseUrl: string}} */ s) =>
  ({ roots: { service: s.pid }, opts: { includePostgres: true, postgresBackendsOf: databaseOf(s) } });

/** A service as the fleet scenario needs it (`label` names it in the output). */
export async function startFleetService(/** @type {string} */ label) {
  const env = pkiEnv('encrypted_database');
  const dir = path.dirname(env.SVC_PKI_ROOT_CERT_PATH);
  const listenerPem = path.join(dir, 'fleet-listener.pem');
  const listenerKey = path.join(dir, 'fleet-listener.key');
  try {
    readFileSync(listenerPem);
  } catch {
    ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', listenerKey, '-out', listenerPem,
      '-subj', '/CN=bench fleet enrollment', '-days', '2', '-addext', 'subjectAltName=IP:127.0.0.1']);
  }
  const service = await startService({
    env: {
      ...env, ...GRPC_BENCH_ENV,
      SVC_PKI_ENROLLMENT_ENABLED: 'true', SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0',
      SVC_PKI_ENROLLMENT_TLS_CERT_PATH: listenerPem, SVC_PKI_ENROLLMENT_TLS_KEY_PATH: listenerKey,
      SVC_PKI_ENROLLMENT_MAX_CONNECTIONS_PER_IP: '1024', SVC_PKI_ENROLLMENT_MAX_CONNECTIONS: '4096',
      // The figures enroll one probe tenant's devices thousands of times: the abuse windows would answer 429.
      SVC_PKI_ENROLLMENT_ENTITY_RATE_LIMIT: '1000000', SVC_PKI_ENROLLMENT_TENANT_RATE_LIMIT: '1000000',
      // Two services at once on a PostgreSQL shared with others (max_connections 100 here): smaller pools.
      SVC_DB_POOL_MAX: process.env.BENCH_FLEET_POOL_MAX ?? '5',
    },
  });
  return { label, ...service, caDir: dir };
}

/**
 * The probe tenant (seedAdapterWorld's: 16 devices, a protocol adapter's token for gRPC) with its CA,
 * provisioned at its first issuance through the same provisioning as createTenant's hook; 16 leaves (the
 * last 4 revoked, key_compromise), their OCSP requests, and the OCSP request for the CA's own certificate
 * (chain revocation: the platform intermediate answers it).
 * @param {Awaited<ReturnType<typeof startFleetService>>} service
 */
export async function seedProbe(service) {
  const http = service.ports.http;
  const world = await seedAdapterWorld({ httpPort: http, databaseUrl: service.databaseUrl });
  const admin = await adminSession(http);
  const csrPem = readFileSync(path.join(service.caDir, 'leaf.csr'), 'utf8');
  const leaves = [];
  for (const [i, entityId] of world.devices.entries()) {
    const out = (await withRetry(() => graphql(http, ISSUE_PEM, { i: { entityId, csrPem, idempotencyKey: `fleet-probe-${i}` } }, admin))).issueCertificateFromCsrV2;
    leaves.push({ ...out.certificate, chainPem: out.chainPem, entityId });
  }
  for (const leaf of leaves.slice(12)) {
    await graphql(http, 'mutation ($i: RevokeCertificateV2Input!) { revokeCertificateV2(input: $i) { revokedAt } }', { i: { credentialId: leaf.credentialId, reason: 'key_compromise' } }, admin);
  }
  const sql = postgres(service.databaseUrl, { max: 1, onnotice: () => {} });
  let alias;
  let platformIntermediateId;
  try {
    [{ alias }] = await sql`select alias from tenants where id = ${world.tenant}`;
    [{ id: platformIntermediateId }] = await sql`select id from pki_authorities where kind = 'platform_intermediate' and status = 'active'`;
  } finally {
    await sql.end();
  }
  const work = mkdtempSync(path.join(tmpdir(), `bench-fleet-${service.label}-`));
  process.once('exit', () => rmSync(work, { recursive: true, force: true }));
  const f = (/** @type {string} */ n) => path.join(work, n);
  const caPem = firstPem(leaves[0].chainPem);
  writeFileSync(f('ca.pem'), caPem);
  const request = (/** @type {string} */ issuer, /** @type {string} */ certPem) => {
    writeFileSync(f('cert.pem'), certPem);
    ssl(['ocsp', '-issuer', issuer, '-cert', f('cert.pem'), '-no_nonce', '-reqout', f('req.der')]);
    return readFileSync(f('req.der')).toString('base64');
  };
  const leafOcsp = leaves.map((l) => request(f('ca.pem'), l.certificatePem));
  const chainOcsp = [request(path.join(service.caDir, 'int.pem'), caPem)];
  const derOf = (/** @type {string} */ pem) => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  return {
    admin, world, alias, caId: leaves[0].issuerId, platformIntermediateId, leafOcsp, chainOcsp,
    // The 12 leaves not revoked: a revoked one is answered with an error status (and its trailer).
    resolveRequests: leaves.slice(0, 12).map((l) => ({ certificate_der: derOf(l.certificatePem).toString('base64') })),
    csrDerBase64: ssl(['req', '-in', path.join(service.caDir, 'leaf.csr'), '-outform', 'DER']).toString('base64'),
  };
}

/**
 * `count` client certificates of the probe tenant's devices (one GraphQL issuance each, 16 in flight), as
 * TLS contexts: each re-enrollment presents one never presented before (a certificate renews once).
 * @param {Awaited<ReturnType<typeof startFleetService>>} service @param {Awaited<ReturnType<typeof seedProbe>>} probe @param {number} count
 */
export async function clientCertificates(service, probe, count) {
  const csrPem = readFileSync(path.join(service.caDir, 'leaf.csr'), 'utf8');
  const key = readFileSync(path.join(service.caDir, 'leaf.key'));
  const contexts = [];
  let n = 0;
  const stamp = Date.now().toString(36);
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (n < count) {
      const i = n++;
      const out = (await withRetry(() => graphql(service.ports.http, ISSUE_PEM, {
        i: { entityId: probe.world.devices[i % probe.world.devices.length], csrPem, idempotencyKey: `fleet-client-${stamp}-${i}` },
      }, probe.admin))).issueCertificateFromCsrV2;
      contexts.push(createSecureContext({ cert: out.certificate.certificatePem, key }));
    }
  }));
  return contexts;
}

/**
 * `count` tenants as rows (name fleet-<n>, alias the same), in one statement: what createTenant writes for
 * the tenant itself, without its authorization side (the creator's tenant-admin role), which is not the
 * certificate authority's cost and is measured by bench/tenant-create.js. The CAs are then provisioned
 * through the service.
 * @param {{databaseUrl: string}} service @param {number} from @param {number} count
 * @returns {Promise<string[]>}
 */
export async function insertTenants(service, from, count) {
  const sql = postgres(service.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`insert into tenants (name, alias)
      select 'fleet-' || g, 'fleet-' || g from generate_series(${from}::int, ${from + count - 1}::int) g returning id`;
    return rows.map((r) => r.id);
  } finally {
    await sql.end();
  }
}

const PROVISION_CA = 'mutation ($t: ID!) { provisionTenantAuthorityAutomatically(tenantId: $t) { succeeded validationError authority { id } } }';

/**
 * Each tenant's CA provisioned through GraphQL provisionTenantAuthorityAutomatically (the provisioning
 * createTenant's hook and the start-up reconciliation use: a P-256 key sealed in the database, a CSR, a
 * certificate signed by the platform intermediate, the row and its audit event in one transaction),
 * `concurrency` in flight as an operator's script would, measured per chunk: wall and CPU (service + its
 * database's backends) per CA.
 * @param {Awaited<ReturnType<typeof startFleetService>>} service @param {string} admin @param {string[]} tenantIds
 * @param {{concurrency: number, chunk: number, onChunk?: (c: any) => void}} o
 */
export async function provisionTenants(service, admin, tenantIds, { concurrency, chunk, onChunk }) {
  const chunks = [];
  const { roots, opts } = cpuOf(service);
  const before = (await countTenantCas(service)).cas;
  for (let start = 0; start < tenantIds.length; start += chunk) {
    const ids = tenantIds.slice(start, start + chunk);
    let next = 0;
    const latencies = [];
    const window = startCpuWindow(roots, opts);
    await Promise.all(Array.from({ length: Math.min(concurrency, ids.length) }, async () => {
      while (next < ids.length) {
        const t = ids[next++];
        const t0 = process.hrtime.bigint();
        const out = (await withRetry(() => graphql(service.ports.http, PROVISION_CA, { t }, admin)))?.provisionTenantAuthorityAutomatically;
        if (out && !out.succeeded) throw new Error(`provisioning the CA of tenant ${t} failed: ${out.validationError}`);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }));
    const cpu = window.stop();
    latencies.sort((a, b) => a - b);
    const size = ids.length;
    const c = {
      casBefore: before + start, casAfter: before + start + size, concurrency, wallSeconds: cpu.wallSeconds,
      wallMsPerCa: (cpu.wallSeconds / size) * 1e3, cpuMsPerCa: ((cpu.cpuSeconds.service + cpu.cpuSeconds.postgres) / size) * 1e3,
      processCpuMsPerCa: (cpu.cpuSeconds.service / size) * 1e3, p50Ms: latencies[Math.floor(size / 2)], p90Ms: latencies[Math.floor(size * 0.9)],
      otherCpuSeconds: cpu.otherCpuSeconds,
    };
    chunks.push(c);
    onChunk?.(c);
  }
  return chunks;
}

/**
 * A retryable refusal (SERVICE_UNAVAILABLE: a connection timing out on a saturated machine) is retried a
 * few times, as an operator's script would; a retry whose first attempt committed after all adds a CA
 * version (the newest is active), never a second active one, and an issuance retried with its
 * idempotency key is answered the first one's certificate.
 */
async function withRetry(/** @type {() => Promise<any>} */ call) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const message = String(/** @type {Error} */ (err).message);
      // "database error": the shared PostgreSQL refused a connection (too many clients), nothing was written.
      if (attempt >= 8 || !/"retryable":true|"message":"database error"/.test(message)) throw err;
      retries++;
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
}
let retries = 0;
/** How many provisioning calls were retried (reported with the figures). */
export const provisioningRetries = () => retries;

/** Active tenant CAs of the service's database (every created tenant must have one). */
export async function countTenantCas(/** @type {{databaseUrl: string}} */ service) {
  const sql = postgres(service.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select count(*)::int as cas, (select count(*)::int from tenants) as tenants
      from pki_authorities where kind = 'tenant_intermediate' and status = 'active'`;
    return row;
  } finally {
    await sql.end();
  }
}
