// `npm run ca:init [-- <directory>]`: writes the development CA's files (the ones a first start on the
// embedded database makes) for an operator running on their own PostgreSQL, and prints the settings that
// point the service at them. Reuses the files already there. Default directory: SVC_DATA_DIR/pki.
import path from 'node:path';
import { ConfigError, devCaFiles, loadConfig } from '../../config.js';
import { ensureDevCaFiles } from './dev-ca-files.js';

async function run(): Promise<void> {
  const config = loadConfig(process.env);
  const dir = process.argv[2];
  const files = dir ? devCaFiles(path.resolve(dir)) : config.pki.devCa.files;
  const { created } = await ensureDevCaFiles(files);
  process.stderr.write(`development CA ${created ? 'written to' : 'already in'} ${files.dir} (the root key, ${path.basename(files.rootKey)}, is never read by the service: `
    + 'keep it offline or delete it). Not for production. Set these, then start the service:\n');
  process.stdout.write([
    `export SVC_PKI_ROOT_CERT_PATH='${files.rootCert}'`,
    `export SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH='${files.intermediateCert}'`,
    `export SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH='${files.intermediateKey}'`,
    `export SVC_PKI_CA_KEY_ENCRYPTION_KEY="$(cat '${files.keyEncryptionKey}')"`,
    'export SVC_PKI_ENROLLMENT_ENABLED=true',
    `export SVC_PKI_ENROLLMENT_TLS_CERT_PATH='${files.serverCert}'`,
    `export SVC_PKI_ENROLLMENT_TLS_KEY_PATH='${files.serverKey}'`,
    '',
  ].join('\n'));
}

run().catch((err: unknown) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `ca:init failed: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
