// Owns the soak's world, made through the API of the first instance before the load: a tenant (its CA
// provisioned on creation), one channel per publish protocol, devices with publish on every channel and a
// shared key each, a custom endpoint, one certificate per device (the start of its renewal chain) and OCSP
// requests for a few leaves. Everything the operations need is returned as plain data.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { adminSession, graphql } from '../scenarios/auth-whoami-anon.js';
import { ISSUE } from './pki-fixture.js';

export const DEVICES = 8;
export const CUSTOM_PATH = '/api/custom/soak/entity';
const OCSP_LEAVES = 8;
export const ISSUE_PEM = ISSUE.replace('certificate { credentialId serialNumber }', 'chainPem certificate { credentialId serialNumber issuerId certificatePem }');

/**
 * @param {{http: number, databaseUrl: string, caDir: string}} opts
 */
export async function buildWorld({ http, databaseUrl, caDir }) {
  const f = (/** @type {string} */ n) => path.join(caDir, n);
  const token = await adminSession(http);
  const tenant = (await graphql(http, 'mutation { createTenant(input: {name: "soak"}) { id } }', {}, token)).createTenant.id;
  const channels = /** @type {Record<'http' | 'mqtt' | 'coap', string>} */ ({});
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  /** @type {{id: string, key: string}[]} */
  const devices = [];
  try {
    for (const protocol of /** @type {const} */ (['http', 'mqtt', 'coap'])) {
      const [channel] = await sql`insert into resources (kind, name, tenant_id) values ('channel', ${`soak ${protocol}`}, ${tenant}) returning id`;
      channels[protocol] = channel.id;
    }
    // One block for the three channels' publish and subscribe, granted to every device.
    const blocks = [];
    for (const channel of Object.values(channels)) {
      const [block] = await sql`insert into permission_blocks (tenant_id, scope_mode, object_kind, object_id, effect)
        values (${tenant}, 'object', 'resource', ${channel}, 'allow') returning id`;
      await sql`insert into permission_block_actions (block_id, action_id) select ${block.id}, id from actions where name in ('publish', 'subscribe')`;
      blocks.push(block.id);
    }
    for (let i = 0; i < DEVICES; i++) {
      const id = (await graphql(http, 'mutation ($t: ID!, $n: String!) { createEntity(input: {kind: device, name: $n, tenantId: $t}) { id } }', { t: tenant, n: `soak-device-${i}` }, token)).createEntity.id;
      for (const block of blocks) await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${tenant}, 'entity', ${id}, ${block})`;
      const key = (await graphql(http, 'mutation ($id: ID!) { createSharedKey(entityId: $id) { key } }', { id }, token)).createSharedKey.key;
      devices.push({ id, key });
    }
  } finally {
    await sql.end();
  }
  await graphql(http, 'mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }', {
    i: {
      key: 'soak_entity', name: 'soak entity', method: 'GET', path: CUSTOM_PATH, operationKind: 'query',
      graphql: 'query ($id: ID!) { entity(id: $id) { id name kind } }', variablesMapping: { id: '$query.id' }, status: 'active',
    },
  }, token);

  // Each device's first certificate: the head of its renewal chain.
  const csrPem = readFileSync(f('leaf.csr'), 'utf8');
  /** @type {{credentialId: string, serialNumber: string, issuerId: string, certificatePem: string, chainPem: string}[]} */
  const leaves = [];
  for (const device of devices) {
    const out = (await graphql(http, ISSUE_PEM, { i: { entityId: device.id, csrPem, idempotencyKey: `soak-head-${device.id}` } }, token)).issueCertificateFromCsrV2;
    leaves.push({ ...out.certificate, chainPem: out.chainPem });
  }
  // OCSP requests (as `openssl ocsp` builds them) for extra leaves, a quarter of them revoked.
  const issuerPem = /** @type {string} */ (leaves[0]?.chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/)?.[0]);
  writeFileSync(f('soak-issuer.pem'), issuerPem);
  const ocspRequests = [];
  for (let i = 0; i < OCSP_LEAVES; i++) {
    const out = (await graphql(http, ISSUE_PEM, { i: { entityId: /** @type {any} */ (devices[i % DEVICES]).id, csrPem, idempotencyKey: `soak-ocsp-${i}` } }, token)).issueCertificateFromCsrV2;
    if (i < OCSP_LEAVES / 4) {
      await graphql(http, 'mutation ($i: RevokeCertificateV2Input!) { revokeCertificateV2(input: $i) { revokedAt } }', { i: { credentialId: out.certificate.credentialId, reason: 'key_compromise' } }, token);
    }
    writeFileSync(f('soak-ocsp-leaf.pem'), out.certificate.certificatePem);
    execFileSync('openssl', ['ocsp', '-issuer', f('soak-issuer.pem'), '-cert', f('soak-ocsp-leaf.pem'), '-no_nonce', '-reqout', f('soak-ocsp-req.der')], { stdio: 'pipe' });
    ocspRequests.push(readFileSync(f('soak-ocsp-req.der')));
  }
  return {
    tenant, channels, devices, csrPem, ocspRequests, ocspPath: `/certs/issuers/${leaves[0]?.issuerId}/ocsp`,
    renewalHeads: leaves.map((l) => l.credentialId),
    // Setup's own certificates, apart from the load's: the stored check counts the load's by id.
    setupCertificates: leaves.length + OCSP_LEAVES,
  };
}
