// Who is enrolling, per entry point: a bearer token or session (/pki/enroll, EST), an entity identifier and
// secret (EST Basic, through the auth domain's credential check), or the leaf verified in the TLS handshake
// (/pki/reenroll, EST simplereenroll), mapped to its exact credential. Every refusal names what was wrong.
import type { Auth } from '../../auth/index.js';
import { AppError, forbidden, invalidInput, isAppError, unauthenticated } from '../../errors.js';
import type { ResolvedCertificate } from '../issuance/certificates.js';
import type { ClientCertificates } from '../resolution/client-certificates.js';

/** The client certificate as the handshake left it, with OpenSSL's verdict against the listener's roots and why. */
export interface PeerCertificate {
  der: Buffer;
  authorized: boolean;
  error: string | null;
}

export interface EnrollingSubject {
  entityId: string;
  tenantId: string | null;
}

/**
 * An entity's bearer token or session. Scoped access tokens may not mint credentials (SPEC "Authentication"
 * 7). Unusable tokens count against the client's address (auth's authenticateFrom).
 */
export async function bearerSubject(auth: Auth, headers: Record<string, string>, route: string, ip: string | null): Promise<EnrollingSubject> {
  const principal = await auth.authenticateFrom(headers, ip);
  if (!principal) throw unauthenticated(`missing authentication: ${route} takes a bearer token (session or access token)`);
  if (principal.scoped) throw forbidden('forbidden; scoped access tokens cannot enroll certificates');
  return { entityId: principal.entityId, tenantId: principal.homeTenantId };
}

/**
 * `Basic base64(identifier:secret)`: the entity's shared key, checked like the gRPC credential check and
 * throttled like login, per identity and client address.
 */
export async function basicSubject(auth: Auth, header: string, ip: string | null): Promise<EnrollingSubject> {
  let decoded: string;
  try {
    decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  } catch {
    throw unauthenticated('malformed Basic credentials');
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw unauthenticated('Basic credentials must be <entity identifier>:<secret>');
  const match = await auth.authenticateOwnCredential({
    identifier: decoded.slice(0, colon), secret: decoded.slice(colon + 1), kind: 'shared_key', tenantId: '', tenantAlias: '',
  }, 'est', ip);
  return { entityId: match.entityId, tenantId: match.tenantId };
}

/** EST's challenge (RFC 7030 3.2.3, RFC 9110 11.6.1: every 401 names how to authenticate). */
const EST_CHALLENGE = 'Basic realm="est"';

function withChallenge(err: unknown): never {
  if (isAppError(err) && err.kind === 'UNAUTHENTICATED' && err.details?.challenge === undefined) {
    throw new AppError('UNAUTHENTICATED', err.message, { code: err.code, details: { ...err.details, challenge: EST_CHALLENGE } });
  }
  throw err;
}

/**
 * EST's initial enrollment: Bearer or Basic (a client certificate authenticates re-enrollment only). Every
 * refusal of the credential is a 401 with `WWW-Authenticate: Basic realm="est"`.
 */
export function estSubject(auth: Auth, headers: Record<string, string>, ip: string | null): Promise<EnrollingSubject> {
  const header = headers.authorization;
  if (!header) {
    throw new AppError('UNAUTHENTICATED', 'missing authentication: EST enrollment takes Basic (entity identifier and shared key) or a bearer token', {
      details: { challenge: EST_CHALLENGE },
    });
  }
  const subject = /^basic /i.test(header) ? basicSubject(auth, header, ip) : bearerSubject(auth, headers, 'EST enrollment', ip);
  return subject.catch(withChallenge);
}

/** Refusals the holder can act on say what to do next. */
const HINTS: Partial<Record<string, string>> = {
  revoked: ': enroll again with a token at /pki/enroll',
  expired: ': enroll again with a token at /pki/enroll',
};

/**
 * The credential of the leaf presented in the handshake, verified by the service's client-certificate
 * verifier (src/pki/client-certificates.ts). Re-enrollment never looks at bearer credentials: only this
 * certificate, issued here, active and unexpired under authorities that still vouch for it, names the
 * credential being renewed.
 */
export async function certificateSubject(certificates: ClientCertificates, peer: PeerCertificate | null): Promise<ResolvedCertificate> {
  if (!peer) throw unauthenticated('a client certificate is required: present the certificate being renewed in the TLS handshake');
  const verdict = await certificates.verify({ der: peer.der, chainVerified: peer.authorized, chainError: peer.error }, { acceptExternal: false });
  if (!verdict.ok) throw unauthenticated(`${verdict.reason}${HINTS[verdict.code] ?? ''}`);
  if (!verdict.issuedHere) throw unauthenticated('client certificate is not issued by this service\'s authorities');
  return verdict.certificate;
}

/** Fields a native caller may not choose: they come from the authenticated subject. */
const CHOSEN_BY_SUBJECT = ['entity_id', 'tenant_id', 'issuer_id', 'profile_id', 'scope', 'entityId', 'tenantId', 'issuerId', 'profileId', 'credential_id', 'credentialId'];

export interface NativeBody {
  csrPem: string;
  ttlSecs: number | undefined;
  idempotencyKey: string;
}

/** `{csr_pem, ttl_secs?, idempotency_key}` (INTERFACES.md section 3). */
export function nativeBody(body: Buffer): NativeBody {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw invalidInput('request body must be JSON: {csr_pem, ttl_secs?, idempotency_key}');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidInput('request body must be a JSON object');
  const o = parsed as Record<string, unknown>;
  for (const field of CHOSEN_BY_SUBJECT) {
    if (o[field] !== undefined) throw invalidInput(`${field} cannot be chosen: it comes from the authenticated subject`);
  }
  if (typeof o.csr_pem !== 'string' || o.csr_pem.trim() === '') throw invalidInput('csr_pem is required (a PEM certificate request)');
  if (typeof o.idempotency_key !== 'string' || o.idempotency_key === '') throw invalidInput('idempotency_key is required');
  if (o.ttl_secs !== undefined && o.ttl_secs !== null && (typeof o.ttl_secs !== 'number' || !Number.isInteger(o.ttl_secs) || o.ttl_secs <= 0)) {
    throw invalidInput('ttl_secs must be a positive integer');
  }
  return { csrPem: o.csr_pem, ttlSecs: (o.ttl_secs as number | null) ?? undefined, idempotencyKey: o.idempotency_key };
}
