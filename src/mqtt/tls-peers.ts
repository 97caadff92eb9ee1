// Client certificates on MQTT over TLS. The handshake asks for one naming only the operator's client CA
// (SVC_MQTT_TLS_CLIENT_CA_PATH) or, without it, the service's roots: never every tenant CA, whose subjects
// would overflow the CertificateRequest. OpenSSL's verdict decides nothing for a certificate the service
// issued: the certificate authority's verifier (src/pki/client-certificates.ts) does, as the connection
// opens and whenever the session's key is checked again, so a revocation ends a connected session too.
// A certificate the service issued binds the connection to its entity: the CONNECT's key must be that
// entity's. Certificates of the operator's CA (not issued here) are accepted on their chain alone.
import type { TLSSocket } from 'node:tls';
import type { ClientCertificates, ClientCertificateVerdict } from '../pki/index.js';

/** The verdict on a connection's certificate now (cached by the verifier; a revocation drops it). */
export type CertificateCheck = () => Promise<ClientCertificateVerdict>;

export interface TlsPeerSettings {
  /** PEM of the operator's client CA: a certificate becomes mandatory, and one it signed is accepted by chain. */
  clientCa?: Buffer | undefined;
  /** The service's verifier; without it, certificates are checked only against clientCa, by OpenSSL. */
  clientCertificates?: ClientCertificates | undefined;
}

/** node:tls options for the listener: which CAs to name, and whether to ask at all. */
export async function tlsPeerOptions(s: TlsPeerSettings): Promise<{ ca?: Buffer | string; requestCert: boolean; rejectUnauthorized: boolean }> {
  if (!s.clientCertificates) return { ca: s.clientCa, requestCert: s.clientCa !== undefined, rejectUnauthorized: s.clientCa !== undefined };
  const ca = s.clientCa ?? (await s.clientCertificates.anchorsPem());
  // Nothing to name (no client CA, no certificate authority): no certificate is asked for.
  return ca ? { ca, requestCert: true, rejectUnauthorized: false } : { requestCert: false, rejectUnauthorized: false };
}

/**
 * The check of a connection's certificate, started as the connection opens so the CONNECT rarely waits;
 * null when it presented none. The first call answers that verdict, later calls verify again.
 */
export function certificateCheck(socket: TLSSocket, s: TlsPeerSettings): CertificateCheck | null {
  const certificates = s.clientCertificates;
  const x509 = socket.getPeerX509Certificate();
  if (!certificates || !x509) return null;
  const reason = socket.authorizationError as unknown;
  const presented = {
    der: x509.raw, chainVerified: socket.authorized, chainError: reason ? String((reason as { code?: string }).code ?? reason) : null,
  };
  const options = { acceptExternal: s.clientCa !== undefined };
  const verify = () => certificates.verify(presented, options);
  let first: Promise<ClientCertificateVerdict> | null = verify();
  first.catch(() => undefined);
  return () => {
    const pending = first;
    first = null;
    return pending ?? verify();
  };
}

/** Why a connection's certificate refuses the device its key authenticated; null when the two agree. */
export function certificateRefusal(verdict: ClientCertificateVerdict, entityId: string): string | null {
  if (!verdict.ok) return `client certificate refused: ${verdict.reason}`;
  if (verdict.issuedHere && verdict.certificate.entityId.toLowerCase() !== entityId.toLowerCase()) {
    return 'client certificate belongs to another entity than the key';
  }
  return null;
}
