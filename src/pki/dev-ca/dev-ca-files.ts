// The development CA's files (issue 34): a root, a platform intermediate it signs and the enrollment
// listener's server certificate for localhost, made with @peculiar/x509 over node's WebCrypto (no openssl)
// and written once under SVC_DATA_DIR/pki; later starts reuse them. Nothing here touches the database.
import { randomBytes, webcrypto } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { DevCaFiles } from '../../config.js';
import { derToPem } from '../x509/der.js';
import {
  AuthorityKeyIdentifierExtension, BasicConstraintsExtension, ExtendedKeyUsage, ExtendedKeyUsageExtension, KeyUsageFlags,
  KeyUsagesExtension, SubjectAlternativeNameExtension, SubjectKeyIdentifierExtension, X509CertificateGenerator,
} from '../x509/x509.js';

const ECDSA = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;
/** Marks the root as the development CA's, so a start can tell it from an operator's root in the database. */
export const DEV_ROOT_CN = 'development root CA';

/** 16 random bytes, positive and without a leading zero octet: a valid DER INTEGER as given. */
const serial = () => {
  const b = randomBytes(16);
  b[0] = ((b[0] as number) & 0x7f) | 0x40;
  return b.toString('hex');
};

// The DOM's WebCrypto types as @peculiar/x509 declares them (this project compiles without the DOM lib).
type KeyPair = Parameters<typeof X509CertificateGenerator.createSelfSigned>[0]['keys'];
type Crypto = NonNullable<Parameters<typeof X509CertificateGenerator.create>[1]>;
const keyPair = async () => (await webcrypto.subtle.generateKey(ECDSA, true, ['sign', 'verify'])) as unknown as KeyPair;
const pkcs8Pem = async (key: KeyPair['privateKey']) =>
  derToPem(new Uint8Array(await webcrypto.subtle.exportKey('pkcs8', key as unknown as webcrypto.CryptoKey)), 'PRIVATE KEY');

/** Root (10 years), platform intermediate (5 years, pathlen 1) and a TLS server certificate (2 years). */
async function makeDevCa(now = new Date()) {
  const id = randomBytes(4).toString('hex');
  const notBefore = new Date(now.getTime() - 5 * 60_000);
  const crypto = webcrypto as unknown as Crypto;
  const rootKeys = await keyPair();
  const root = await X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(), name: `CN=${DEV_ROOT_CN} ${id}, O=iot-identity-service development CA`, notBefore,
    notAfter: new Date(now.getTime() + 3650 * DAY_MS), signingAlgorithm: ECDSA, keys: rootKeys,
    extensions: [
      new BasicConstraintsExtension(true, undefined, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
      await SubjectKeyIdentifierExtension.create(rootKeys.publicKey, false, crypto),
    ],
  }, crypto);
  const intermediateKeys = await keyPair();
  const intermediate = await X509CertificateGenerator.create({
    serialNumber: serial(), subject: `CN=development platform intermediate ${id}, O=iot-identity-service development CA`, issuer: root.subject,
    notBefore, notAfter: new Date(now.getTime() + 1825 * DAY_MS), signingAlgorithm: ECDSA,
    publicKey: intermediateKeys.publicKey, signingKey: rootKeys.privateKey,
    extensions: [
      // pathlen 1: tenant intermediates sit below it.
      new BasicConstraintsExtension(true, 1, true),
      new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign | KeyUsageFlags.digitalSignature, true),
      await SubjectKeyIdentifierExtension.create(intermediateKeys.publicKey, false, crypto),
      await AuthorityKeyIdentifierExtension.create(rootKeys.publicKey, false, crypto),
    ],
  }, crypto);
  const serverKeys = await keyPair();
  const server = await X509CertificateGenerator.create({
    serialNumber: serial(), subject: `CN=localhost, O=iot-identity-service development CA`, issuer: intermediate.subject,
    notBefore, notAfter: new Date(now.getTime() + 825 * DAY_MS), signingAlgorithm: ECDSA,
    publicKey: serverKeys.publicKey, signingKey: intermediateKeys.privateKey,
    extensions: [
      new BasicConstraintsExtension(false, undefined, true),
      new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
      new ExtendedKeyUsageExtension([ExtendedKeyUsage.serverAuth], false),
      new SubjectAlternativeNameExtension([{ type: 'dns', value: 'localhost' }, { type: 'ip', value: '127.0.0.1' }, { type: 'ip', value: '::1' }], false),
      await SubjectKeyIdentifierExtension.create(serverKeys.publicKey, false, crypto),
      await AuthorityKeyIdentifierExtension.create(intermediateKeys.publicKey, false, crypto),
    ],
  }, crypto);
  const pem = (c: { rawData: ArrayBuffer }) => derToPem(new Uint8Array(c.rawData), 'CERTIFICATE');
  return {
    rootCert: pem(root), rootKey: await pkcs8Pem(rootKeys.privateKey),
    intermediateCert: pem(intermediate), intermediateKey: await pkcs8Pem(intermediateKeys.privateKey),
    // The chain a TLS client needs besides the root it trusts.
    serverCert: pem(server) + pem(intermediate), serverKey: await pkcs8Pem(serverKeys.privateKey),
    keyEncryptionKey: `${randomBytes(32).toString('base64')}\n`,
  };
}

const FILE_KEYS = ['rootCert', 'rootKey', 'intermediateCert', 'intermediateKey', 'serverCert', 'serverKey', 'keyEncryptionKey'] as const;

/**
 * Makes the development CA's files unless its directory already holds them; returns whether it made them.
 * They are written to a fresh directory renamed into place, so a start that dies half way leaves nothing
 * half-written, and two processes racing keep the first complete set.
 */
export async function ensureDevCaFiles(files: DevCaFiles): Promise<{ created: boolean }> {
  if (!existsSync(files.rootCert)) {
    const made = await makeDevCa();
    mkdirSync(path.dirname(files.dir), { recursive: true });
    const tmp = `${files.dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    mkdirSync(tmp, { mode: 0o700 });
    try {
      for (const k of FILE_KEYS) writeFileSync(path.join(tmp, path.basename(files[k])), made[k], { mode: k.endsWith('Cert') ? 0o644 : 0o600 });
      // An empty directory in the way (made by hand) is replaced; one with files in it is not.
      if (existsSync(files.dir)) rmdirSync(files.dir);
      renameSync(tmp, files.dir);
      return { created: true };
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      if (!existsSync(files.rootCert)) throw new Error(`the development CA cannot be written to ${files.dir}: ${(err as Error).message}`);
    }
  }
  const missing = FILE_KEYS.filter((k) => k !== 'rootKey' && !existsSync(files[k])).map((k) => files[k]);
  if (missing.length) {
    throw new Error(`the development CA in ${files.dir} is incomplete (missing ${missing.join(', ')}): remove the directory to make a new one, or configure your own (docs/pki.md)`);
  }
  return { created: false };
}

/** The key-encryption key the development CA seals the intermediate's key with (when none is configured). */
export function readDevKeyEncryptionKey(files: DevCaFiles): Buffer {
  const key = Buffer.from(readFileSync(files.keyEncryptionKey, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${files.keyEncryptionKey} must hold base64 of 32 bytes`);
  return key;
}
