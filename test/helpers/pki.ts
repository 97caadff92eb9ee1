// Certificate authority fixtures made with openssl, the way an operator would: an offline root, a platform
// intermediate it signs (key as PKCS#8 or SEC1 PEM), CSRs from `openssl req`, and the openssl checks the
// tests assert with (verify a leaf's chain to the root, print its extensions).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newKek } from './ca-keys.js';
import { ok } from './management.js';
import type { TestService } from './service.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

const ssl = (args: string[], input?: string) => execFileSync('openssl', args, { stdio: 'pipe', input }).toString();

export interface CaFiles {
  dir: string;
  root: string;
  rootKey: string;
  intermediate: string;
  intermediateKey: string;
  /** What the service is started with: root, platform intermediate and a key-encryption key. */
  env: Record<string, string>;
  file(name: string): string;
}

/** A root (10 years) and a platform intermediate (2 years) signed by it, both P-256 unless asked otherwise. */
export function makeCaFiles(t: Teardown, options: { intermediateKeyFormat?: 'pkcs8' | 'sec1'; name?: string; days?: number } = {}): CaFiles {
  const dir = mkdtempSync(path.join(tmpdir(), 'pki-ca-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const f = (name: string) => path.join(dir, name);
  const name = options.name ?? 'test';
  ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('root.key'), '-out', f('root.pem'),
    '-subj', `/O=svc tests/CN=${name} root CA`, '-days', '3650',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-addext', 'subjectKeyIdentifier=hash']);
  addIntermediate(dir, 'intermediate', `/O=svc tests/CN=${name} platform intermediate`, options.days ?? 730, options.intermediateKeyFormat ?? 'pkcs8');
  return {
    dir, root: f('root.pem'), rootKey: f('root.key'), intermediate: f('intermediate.pem'), intermediateKey: f('intermediate.key'), file: f,
    env: {
      SVC_PKI_ROOT_CERT_PATH: f('root.pem'),
      SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH: f('intermediate.pem'),
      SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH: f('intermediate.key'),
      SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek(),
    },
  };
}

/** Another intermediate under the same root (`<base>.pem`, `<base>.key`), as an operator's renewal would make. */
export function addIntermediate(dir: string, base: string, subject: string, days: number, keyFormat: 'pkcs8' | 'sec1' = 'pkcs8'): { cert: string; key: string } {
  const f = (name: string) => path.join(dir, name);
  writeFileSync(f(`${base}.ext`), 'basicConstraints=critical,CA:TRUE,pathlen:1\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n');
  ssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${base}.pkcs8.key`), '-out', f(`${base}.csr`), '-subj', subject]);
  ssl(['x509', '-req', '-in', f(`${base}.csr`), '-CA', f('root.pem'), '-CAkey', f('root.key'), '-CAcreateserial', '-days', String(days),
    '-extfile', f(`${base}.ext`), '-out', f(`${base}.pem`)]);
  if (keyFormat === 'sec1') ssl(['ec', '-in', f(`${base}.pkcs8.key`), '-out', f(`${base}.key`)]);
  else writeFileSync(f(`${base}.key`), readFileSync(f(`${base}.pkcs8.key`)));
  return { cert: f(`${base}.pem`), key: f(`${base}.key`) };
}

export type CsrKey = 'ec:P-256' | 'ec:P-384' | 'rsa:2048' | 'rsa:3072' | 'ed25519';

/** `openssl req -new`: a fresh key and a CSR; `addext` are -addext values (subjectAltName=..., basicConstraints=...). */
export function opensslCsr(dir: string, options: { key?: CsrKey; subject?: string; addext?: string[] } = {}): { csrPem: string; keyPath: string } {
  const id = Math.random().toString(36).slice(2, 10);
  const keyPath = path.join(dir, `leaf-${id}.key`);
  const csrPath = path.join(dir, `leaf-${id}.csr`);
  const key = options.key ?? 'ec:P-256';
  const keyArgs = key.startsWith('ec:') ? ['-newkey', 'ec', '-pkeyopt', `ec_paramgen_curve:${key.slice(3)}`]
    : key.startsWith('rsa:') ? ['-newkey', key] : ['-newkey', 'ed25519'];
  ssl(['req', '-new', ...keyArgs, '-nodes', '-keyout', keyPath, '-out', csrPath, '-subj', options.subject ?? '/CN=device-chosen-name',
    ...(options.addext ?? []).flatMap((e) => ['-addext', e])]);
  return { csrPem: readFileSync(csrPath, 'utf8'), keyPath };
}

/** `openssl verify` of a leaf against the root alone, intermediates untrusted: throws with openssl's words when it fails. */
export function opensslVerify(rootPath: string, chainPem: string, leafPem: string, extra: string[] = []): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'pki-verify-'));
  try {
    const f = (name: string) => path.join(dir, name);
    writeFileSync(f('chain.pem'), chainPem);
    writeFileSync(f('leaf.pem'), leafPem);
    return ssl(['verify', '-CAfile', rootPath, ...(chainPem ? ['-untrusted', f('chain.pem')] : []), '-purpose', 'sslclient', ...extra, f('leaf.pem')]).trim();
  } catch (err) {
    throw new Error(`openssl verify failed: ${(err as { stderr?: Buffer }).stderr?.toString() ?? String(err)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `openssl x509 -text` of a PEM certificate. */
export const opensslText = (pem: string) => ssl(['x509', '-noout', '-text'], pem);

/** `openssl x509 -noout -pubkey` of a certificate, and `openssl pkey -pubout` of a private key: equal when they pair. */
export const certPublicKey = (pem: string) => ssl(['x509', '-noout', '-pubkey'], pem);
export const keyPublicKey = (keyPem: string) => ssl(['pkey', '-pubout'], keyPem);

// ---- GraphQL operations of the certificate authority, as clients send them ----

export const CERT_FIELDS = `credentialId entityId issuerId tenantId serialNumber status certificatePem subject dnsNames ipAddresses
  fingerprintSha256 profileId profileName identityUri renewedFromCredentialId renewalDueAt notBefore notAfter expiresAt createdAt revokedAt revocationReason`;
export const ISSUE_CSR = `mutation ($i: IssueCertificateFromCsrV2Input!) { issueCertificateFromCsrV2(input: $i) {
  idempotentReplay privateKeyPem chainPem certificate { ${CERT_FIELDS} } } }`;
export const ISSUE_GENERATED = `mutation ($i: IssueGeneratedCertificateV2Input!) { issueGeneratedCertificateV2(input: $i) {
  idempotentReplay privateKeyPem chainPem certificate { ${CERT_FIELDS} } } }`;
export const RENEW_CSR = `mutation ($i: RenewCertificateFromCsrV2Input!) { renewCertificateFromCsrV2(input: $i) {
  idempotentReplay privateKeyPem chainPem certificate { ${CERT_FIELDS} } } }`;
export const RENEW_GENERATED = `mutation ($i: RenewGeneratedCertificateV2Input!) { renewGeneratedCertificateV2(input: $i) {
  idempotentReplay privateKeyPem chainPem certificate { ${CERT_FIELDS} } } }`;
export const REVOKE = `mutation ($i: RevokeCertificateV2Input!) { revokeCertificateV2(input: $i) {
  reason actorEntityId revokedAt idempotentReplay certificate { ${CERT_FIELDS} } } }`;
export const AUTHORITY_FIELDS = `id tenantId parentId kind version status issuanceEnabled subject serialNumber fingerprintSha256 subjectKeyId
  authorityKeyId certificatePem chainPem csrPem keyBackend keyAlgorithm provisioningMode managedBy failureReason defaultProfileId notBefore notAfter
  createdAt activatedAt retiringAt retiredAt updatedAt ocspUrl caIssuersUrl crlDistributionPointUrl`;
export const AUTHORITIES = `query ($t: ID) { pkiAuthorities(tenantId: $t) { ${AUTHORITY_FIELDS} } }`;

export interface HeldCertificate {
  credentialId: string;
  certificatePem: string;
  /** The issuer's chain below the root, as issuance answers it. */
  chainPem: string;
  keyPem: string;
}

/** A certificate issued through GraphQL for `entityId` (openssl key and CSR), with the key its holder keeps. */
export async function issueHeld(ts: TestService, token: string, dir: string, entityId: string): Promise<HeldCertificate> {
  const csr = opensslCsr(dir);
  const out = (await ok(ts, token, ISSUE_CSR, { i: { entityId, csrPem: csr.csrPem, idempotencyKey: `held-${Math.random().toString(36).slice(2)}` } }))
    .issueCertificateFromCsrV2;
  return { credentialId: out.certificate.credentialId, certificatePem: out.certificate.certificatePem, chainPem: out.chainPem, keyPem: readFileSync(csr.keyPath, 'utf8') };
}
