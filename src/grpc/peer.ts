// Mutual TLS on the gRPC listener (SVC_GRPC_TLS_CLIENT_CA_PATH): the handshake verifies the client's chain
// against that file (grpc-js shows a call only a certificate OpenSSL verified: getAuthContext()), then every
// call's certificate goes through the service's client-certificate verifier (src/pki/client-certificates.ts).
// A certificate one of the service's authorities issued must be active in its records (revoked, unknown or
// under a revoked authority: UNAUTHENTICATED) and binds the call to its entity: a bearer token of any other
// entity is refused on it. An operator's external CA's certificate is accepted on its chain, as before.
import type { ClientCertificates } from '../pki/index.js';
import { callerOf, type CallGate, type VerifyToken } from './call.js';
import { unauthenticated } from '../errors.js';

export function createPeerGate(deps: { clientCertificates: ClientCertificates; verifyToken: VerifyToken }): CallGate {
  const { clientCertificates, verifyToken } = deps;
  return async (call, metadata) => {
    const raw = call.getAuthContext()?.sslPeerCertificate?.raw;
    if (!raw) throw unauthenticated('a client certificate is required (mutual TLS)');
    const verdict = await clientCertificates.verify({ der: raw, chainVerified: true }, { acceptExternal: true });
    if (!verdict.ok) throw unauthenticated(verdict.reason);
    if (!verdict.issuedHere) return { credentialId: null, entityId: null, tenantId: null, subject: verdict.subject };
    const c = verdict.certificate;
    // Calls without a bearer (AuthService.Authenticate takes the token in its body) have nothing to bind.
    if (metadata.get('authorization').length > 0) {
      const caller = await callerOf(metadata, verifyToken);
      if (caller.entityId !== c.entityId) throw unauthenticated('the bearer token belongs to another entity than the client certificate');
    }
    return { credentialId: c.credentialId, entityId: c.entityId, tenantId: c.tenantId, subject: null };
  };
}
