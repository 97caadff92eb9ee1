// The authorities that come from configuration only (SPEC.md: no GraphQL mutation imports them): the
// root (public certificate only; its key never enters the service) and the platform intermediate
// (certificate and key, PEM PKCS#8 or SEC1). Loading is idempotent by fingerprint; a changed one
// retires the previous one. Start also refuses stored keys this configuration cannot use.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { insertAuditEvents } from '../../audit/index.js';
import type { Queryable, Sql } from '../../db/client.js';
import type { Logger } from '../../log.js';
import * as q from './authority-queries.js';
import { readCertificate, type CertificateInfo } from '../issuance/certificate-info.js';
import { pemBlocks } from '../x509/der.js';
import type { CaKeys, GeneratedKey } from '../keys/types.js';

export interface BootstrapSettings {
  rootCertPath: string | undefined;
  platformIntermediateCertPath: string | undefined;
  platformIntermediateKeyPath: string | undefined;
}

function readFile(path: string, setting: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${setting} ${path} cannot be read: ${(err as Error).message}`);
  }
}

function readOneCertificate(path: string, setting: string): CertificateInfo {
  const blocks = pemBlocks(readFile(path, setting), ['CERTIFICATE']);
  if (blocks.length !== 1) throw new Error(`${setting} ${path} must hold exactly one PEM certificate (found ${blocks.length})`);
  const info = readCertificate(blocks[0] as Buffer, `${setting} ${path}`);
  if (!info.isCa) throw new Error(`${setting} ${path} is not a CA certificate (basicConstraints cA is not set)`);
  if (info.notAfter.getTime() <= Date.now()) throw new Error(`${setting} ${path} expired at ${info.notAfter.toISOString()}`);
  return info;
}

/** Refuses to start when any stored key cannot be used by this configuration, naming the authority. */
export function checkStoredKeys(keys: CaKeys, rows: q.AuthorityRow[]): void {
  for (const row of rows) {
    if (!row.key_ref || row.status === 'failed') continue;
    keys.check(row.key_ref, `authority ${row.id} (${row.kind}${row.tenant_id ? ` of tenant ${row.tenant_id}` : ''}, ${row.subject})`);
  }
}

const audit = (tx: Queryable, event: string, row: q.AuthorityRow, details: Record<string, unknown> = {}) =>
  insertAuditEvents(tx, [{
    event, outcome: 'allow', actorEntityId: null, tenantId: null, targetKind: 'authority', targetId: row.id,
    details: { kind: row.kind, version: row.version, fingerprint_sha256: row.fingerprint_sha256, source: 'config', ...details },
  }]);

/**
 * Inserts `info` as the active authority of `kind` unless its fingerprint is known; the previously
 * active one is retired. Returns the ids that changed (empty when nothing did).
 */
async function install(
  sql: Sql, kind: 'root' | 'platform_intermediate', info: CertificateInfo, parentId: string | null, key: GeneratedKey | null, setting: string,
): Promise<string[]> {
  return sql.begin(async (tx) => {
    await q.lockScope(tx, 'platform');
    const known = await q.selectByFingerprint(tx, info.fingerprintSha256);
    if (known) {
      if (known.kind !== kind) throw new Error(`${setting}: this certificate is already known as the ${known.kind} ${known.id}`);
      if (known.status === 'active') return [];
      throw new Error(`${setting}: this certificate was the ${kind} ${known.id}, now ${known.status}; configure a new one instead`);
    }
    const previous = await q.selectActive(tx, kind, null);
    if (previous) await q.completeRetirement(tx, [previous.id]);
    const row = await q.insertAuthority(tx, randomUUID(), {
      tenantId: null, parentId, kind, version: await q.nextVersion(tx, kind, null), status: 'active', issuanceEnabled: false,
      subject: info.subject, serialNumber: info.serialHex, fingerprintSha256: info.fingerprintSha256, subjectKeyId: info.subjectKeyId.toString('hex'),
      authorityKeyId: info.authorityKeyId?.toString('hex') ?? null, certificateDer: info.der, csrPem: null, keyBackend: key?.ref.backend ?? null,
      keyRef: key?.ref ?? null, keyAlgorithm: key?.ref.algorithm ?? null, provisioningMode: 'config', failureReason: null, defaultProfileId: null,
      urls: null, notBefore: info.notBefore, notAfter: info.notAfter, createdBy: null,
    });
    await audit(tx, 'authority.bootstrap', row, { replaced_authority_id: previous?.id ?? null });
    return previous ? [row.id, previous.id] : [row.id];
  });
}

/** Loads root and platform intermediate from configuration; returns the authority ids that changed. */
export async function bootstrapFromConfig(deps: { sql: Sql; keys: CaKeys; log: Logger }, settings: BootstrapSettings): Promise<string[]> {
  const { sql, keys, log } = deps;
  const changed: string[] = [];
  if (settings.rootCertPath) {
    const root = readOneCertificate(settings.rootCertPath, 'SVC_PKI_ROOT_CERT_PATH');
    if (!root.x509.checkIssued(root.x509) || !root.x509.verify(root.publicKey)) {
      throw new Error(`SVC_PKI_ROOT_CERT_PATH ${settings.rootCertPath} is not a self-signed root certificate`);
    }
    const ids = await install(sql, 'root', root, null, null, 'SVC_PKI_ROOT_CERT_PATH');
    if (ids.length) log.info('root certificate loaded', { authority_id: ids[0], fingerprint_sha256: root.fingerprintSha256 });
    changed.push(...ids);
  }
  if (settings.platformIntermediateCertPath && settings.platformIntermediateKeyPath) {
    const setting = 'SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH';
    const cert = readOneCertificate(settings.platformIntermediateCertPath, setting);
    const root = await q.selectActive(sql, 'root', null);
    if (!root?.certificate_der) throw new Error(`${setting} needs SVC_PKI_ROOT_CERT_PATH: the intermediate must chain to the configured root`);
    const rootInfo = readCertificate(root.certificate_der, `root ${root.id}`);
    if (!cert.x509.checkIssued(rootInfo.x509) || !cert.x509.verify(rootInfo.publicKey)) {
      throw new Error(`${setting} ${settings.platformIntermediateCertPath} is not signed by the configured root (${rootInfo.subject})`);
    }
    const known = await q.selectByFingerprint(sql, cert.fingerprintSha256);
    // Idempotent by fingerprint: a known intermediate's key is not read again.
    if (!known || known.status !== 'active') {
      const pem = readFile(settings.platformIntermediateKeyPath, 'SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH');
      let key: GeneratedKey;
      try {
        key = await keys.importPrivateKey(pem);
      } catch (err) {
        throw new Error(`SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH ${settings.platformIntermediateKeyPath}: ${(err as Error).message}`);
      }
      if (!key.spki.equals(cert.spkiDer)) {
        throw new Error(`SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH ${settings.platformIntermediateKeyPath} does not hold the key of the certificate in ${setting}`);
      }
      const ids = await install(sql, 'platform_intermediate', cert, root.id, key, setting);
      if (ids.length) log.info('platform intermediate loaded', { authority_id: ids[0], fingerprint_sha256: cert.fingerprintSha256 });
      changed.push(...ids);
    }
  }
  return changed;
}
