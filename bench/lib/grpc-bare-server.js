// Owns the gRPC baseline: the empty unary method. A grpc-js server built from the service's own proto,
// grpc-js and server options (dist/src/grpc/server.js, with the service's default settings), whose
// AuthService.AuthenticateCredential, AuthzService.Check and CertificateService.ResolveCertificateV2 answer a constant reply of the service's
// shape at once: no metadata read, no authentication, no decision. The same client calls it with the same
// bytes as the service, so the difference in CPU per call is the service's own work. It lives in the
// bench, never in the service: the service exposes no method that skips authentication.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';

const selfPath = fileURLToPath(import.meta.url);

/** The service's grpc-js (the root package's dependency), so both servers run the same library. */
export const serviceGrpc = () => createRequire(join(repoRoot, 'package.json'))('@grpc/grpc-js');

/** The service's compiled gRPC module: proto loading, service constructors, server options. */
export const serviceGrpcModule = () => import(pathToFileURL(join(repoRoot, 'dist', 'src', 'grpc', 'server.js')).href);

/** Start the baseline as a child process; its port is reported as listener "grpc". */
export function startGrpcBareServer() {
  return spawnServer({ args: [selfPath], cwd: repoRoot, name: 'grpc-bare-server', startTimeoutMs: 10_000, ipc: true });
}

const UUID = '00000000-0000-4000-8000-000000000000';

async function serveBare() {
  const grpc = serviceGrpc();
  const { loadServices, serviceOf, serverOptions } = await serviceGrpcModule();
  const { loadConfig } = await import(pathToFileURL(join(repoRoot, 'dist', 'src', 'config.js')).href);
  const services = loadServices();
  const server = new grpc.Server(serverOptions(loadConfig({}).grpc));
  const credential = { entity_id: UUID, tenant_id: UUID, credential_id: UUID };
  const decision = { allowed: true, reason: 'allowed' };
  server.addService(serviceOf(services, 'AuthService').service, {
    AuthenticateCredential: (/** @type {unknown} */ _call, /** @type {Function} */ callback) => callback(null, credential),
  });
  server.addService(serviceOf(services, 'AuthzService').service, {
    Check: (/** @type {unknown} */ _call, /** @type {Function} */ callback) => callback(null, decision),
  });
  const resolved = { entity_id: UUID, tenant_id: UUID, credential_id: UUID, issuer_id: UUID, expires_at: '2030-01-01T00:00:00.000Z', status: 'active' };
  server.addService(serviceOf(services, 'CertificateService').service, {
    ResolveCertificateV2: (/** @type {unknown} */ _call, /** @type {Function} */ callback) => callback(null, resolved),
  });
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (/** @type {Error|null} */ err, /** @type {number} */ port) => {
    if (err) {
      console.error(`grpc bare server could not listen: ${err.message}`);
      process.exit(1);
    }
    console.log(JSON.stringify({ level: 'info', msg: 'listening', listener: 'grpc', host: '127.0.0.1', port }));
    console.log(JSON.stringify({ level: 'info', msg: 'ready' }));
  });
  // The bench died without stopping us: do not keep a port and a process behind.
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
}

if (process.argv[1] === selfPath) await serveBare();
