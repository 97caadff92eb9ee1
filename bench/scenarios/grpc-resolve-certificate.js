// Scenario: gRPC CertificateService.ResolveCertificateV2, an mTLS-terminating adapter asking whose client
// certificate a handshake presented (the leaf DER) over one channel with many calls in flight: the caller's
// bearer, the gate and the resolutions cached. 16 devices, each with a certificate issued through GraphQL
// (the real issuance path) before the load. Against the empty unary method in the same run.
import { adminSession, graphql } from './auth-whoami-anon.js';
import { grpcScenario } from '../lib/grpc-bench.js';
import { ISSUE, leafCsrPem, pkiEnv } from '../lib/pki-fixture.js';

const ISSUE_PEM = ISSUE.replace('certificate { credentialId serialNumber }', 'certificate { credentialId certificatePem }');
const derOf = (/** @type {string} */ pem) => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');

export default grpcScenario({
  name: 'grpc-resolve-certificate',
  description: 'gRPC ResolveCertificateV2 by leaf DER (cached) vs the empty unary method, one channel, same run',
  service: 'CertificateService',
  method: 'ResolveCertificateV2',
  env: pkiEnv('encrypted_database'),
  async prepare(world, service) {
    const admin = await adminSession(service.ports.http);
    const csrPem = leafCsrPem();
    const ders = [];
    for (const [i, entityId] of world.devices.entries()) {
      const issued = await graphql(service.ports.http, ISSUE_PEM, { i: { entityId, csrPem, idempotencyKey: `bench-resolve-${i}` } }, admin);
      ders.push(derOf(issued.issueCertificateFromCsrV2.certificate.certificatePem));
    }
    return ders;
  },
  // Base64: the requests reach the load generator over IPC (JSON), and protobufjs reads bytes from base64.
  requestsOf: (_world, ders) => ders.map((/** @type {Buffer} */ der) => ({ certificate_der: der.toString('base64') })),
});
