// The development CA at start (issue 34): makes or reuses its files, refuses to replace an operator's
// root that the database still holds, and says in one warning line what runs and how to replace it.
import { readFileSync } from 'node:fs';
import type { Sql } from '../../db/client.js';
import type { DevCaFiles } from '../../config.js';
import type { Logger } from '../../log.js';
import * as q from '../authorities/authority-queries.js';
import { readCertificate } from '../issuance/certificate-info.js';
import { pemBlocks } from '../x509/der.js';
import { DEV_ROOT_CN, ensureDevCaFiles, readDevKeyEncryptionKey } from './dev-ca-files.js';

export { ensureDevCaFiles, readDevKeyEncryptionKey };

/**
 * Prepares the development CA before the authorities are loaded from its files. Returns the key-encryption
 * key to seal CA keys with when SVC_PKI_CA_KEY_ENCRYPTION_KEY is not set (its own, kept next to its keys).
 */
export async function prepareDevCa(deps: { sql: Sql; log: Logger }, files: DevCaFiles, configuredKek: Buffer | undefined): Promise<Buffer> {
  const { created } = await ensureDevCaFiles(files);
  const root = readCertificate(pemBlocks(readFileSync(files.rootCert, 'utf8'), ['CERTIFICATE'])[0] as Buffer, files.rootCert);
  const active = await q.selectActive(deps.sql, 'root', null);
  // Loading the development root would retire the active one: never do that to a root an operator gave.
  if (active && active.fingerprint_sha256 !== root.fingerprintSha256 && !active.subject.includes(DEV_ROOT_CN)) {
    throw new Error(`the database holds the root ${active.id} (${active.subject}) but SVC_PKI_ROOT_CERT_PATH is not set: `
      + 'set it (and the platform intermediate) again, or SVC_PKI_DEV_CA=off to run without a root; the development CA does not replace it');
  }
  deps.log.warn(`DEVELOPMENT CERTIFICATE AUTHORITY ${created ? 'created' : 'in use'} (not for production): its root key is only a file here; `
    + 'for production set SVC_PKI_ROOT_CERT_PATH, SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH and _KEY_PATH, SVC_PKI_CA_KEY_ENCRYPTION_KEY and the enrollment TLS files to your own (docs/pki.md)', {
    root: files.rootCert, root_key: files.rootKey, platform_intermediate: files.intermediateCert, platform_intermediate_key: files.intermediateKey,
    enrollment_tls_certificate: files.serverCert, enrollment_tls_key: files.serverKey,
    key_encryption_key: configuredKek ? 'SVC_PKI_CA_KEY_ENCRYPTION_KEY' : files.keyEncryptionKey,
  });
  return configuredKek ?? readDevKeyEncryptionKey(files);
}

