// The enrollment listener's routes: native /pki/enroll and /pki/reenroll (JSON) and EST (RFC 7030), the
// latter also under a label (/.well-known/est/<tenant alias or id>/...). Each authenticates its subject,
// counts it against the enrollment windows, then calls the certificate authority's issuance or renewal with
// a subject caller: the same rules, idempotency and transaction (credential, audit event, outbox record) as
// GraphQL. cacerts answers the platform chain, or under a label that tenant's chain only.
import { createHash } from 'node:crypto';
import type { Auth } from '../../auth/index.js';
import { AppError, invalidInput, notFound } from '../../errors.js';
import type { ClientCertificates, Pki } from '../index.js';
import type { IssuedCertificate } from '../issuance/issuance.js';
import { derToPem, pemBlocks } from '../x509/der.js';
import { readCsrDer } from '../issuance/csr.js';
import { base64Lines, certsOnly, csrAttrs, decodeEstBody, PKCS7_CERTS_ONLY, serverKeygenMultipart } from './encodings.js';
import type { EnrollmentRates } from './limits.js';
import { bearerSubject, certificateSubject, estSubject, nativeBody, type EnrollingSubject, type PeerCertificate } from './subjects.js';

export interface EnrollRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  requestId: string;
  peer: PeerCertificate | null;
  /** The client's address (through trusted proxies): failed credentials are counted per address. */
  ip: string | null;
  /** The EST label (a tenant alias or id) of /.well-known/est/<label>/<operation>; absent without one. */
  label?: string | null;
}

export interface EnrollReply {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

const json = (status: number, value: unknown): EnrollReply => ({ status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });
const est = (contentType: string, der: Uint8Array): EnrollReply => ({
  status: 200, headers: { 'content-type': contentType, 'content-transfer-encoding': 'base64' }, body: base64Lines(der),
});

/** INTERFACES.md section 3: the native enrollment answer. */
function issuedJson(r: IssuedCertificate) {
  const c = r.certificate;
  const m = c.metadata;
  return {
    credential_id: c.id, entity_id: c.entity_id, tenant_id: c.tenant_id, issuer_id: c.issuer_id, profile_id: m.profile_id, profile_name: m.profile_name,
    identity_uri: m.identity_uri, serial_number: c.identifier, certificate_pem: m.certificate_pem, chain_pem: r.chainPem, not_after: m.not_after,
    renewal_threshold_seconds: m.renewal_threshold_seconds, renewal_due_at: m.renewal_due_at, idempotent_replay: r.idempotentReplay,
  };
}

const leafDer = (r: IssuedCertificate) => pemBlocks(r.certificate.metadata.certificate_pem, ['CERTIFICATE'])[0] as Buffer;
/** EST has no idempotency key: the request's CSR stands for it, so a retried request gets the same certificate. */
const estKey = (csrDer: Buffer) => `est:${createHash('sha256').update(csrDer).digest('hex')}`;

function requireEstCsr(req: EnrollRequest, maxBytes: number): Buffer {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/pkcs10') {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', `EST requests take Content-Type application/pkcs10 (base64 DER), not '${type.slice(0, 60) || 'none'}'`);
  }
  const der = decodeEstBody(req.body, 'certificate request');
  if (der.length > maxBytes) throw new AppError('PAYLOAD_TOO_LARGE', `certificate request exceeds the limit of ${maxBytes} bytes (SVC_PKI_ENROLLMENT_MAX_CSR_BYTES)`);
  return der;
}

const EST = '/.well-known/est/';
/** One answer for a malformed label, an unknown tenant and a tenant without a CA: labels list nothing. */
const NO_LABEL = 'certificate authority for this EST label';

export function createEnrollmentRoutes(deps: {
  pki: Pki; auth: Auth; rates: EnrollmentRates; maxCsrBytes: number; generatedKeyIssuance: boolean; clientCertificates: ClientCertificates;
}) {
  const { pki, auth, rates, clientCertificates } = deps;

  /** Under a label, the authenticated subject must belong to the tenant it names (checked after authentication, so it is no oracle). */
  async function requireLabel(req: EnrollRequest, tenantId: string | null): Promise<void> {
    if (!req.label) return;
    const chain = await pki.chains.tenant(req.label);
    if (!chain || chain.tenantId !== tenantId) throw notFound(NO_LABEL);
  }
  const subject = (s: EnrollingSubject, via: string, requestId: string, presentedCredentialId?: string) =>
    ({ kind: 'subject' as const, entityId: s.entityId, requestId, via, presentedCredentialId: presentedCredentialId ?? null });

  async function enroll(req: EnrollRequest): Promise<EnrollReply> {
    const who = await bearerSubject(auth, req.headers, '/pki/enroll', req.ip);
    const body = nativeBody(req.body);
    rates.hit(who.entityId, who.tenantId);
    const issued = await pki.issuance.issueFromCsr(subject(who, 'enroll', req.requestId), body);
    return json(issued.idempotentReplay ? 200 : 201, issuedJson(issued));
  }

  async function reenroll(req: EnrollRequest): Promise<EnrollReply> {
    const presented = await certificateSubject(clientCertificates, req.peer);
    const body = nativeBody(req.body);
    rates.hit(presented.entityId, presented.tenantId);
    const renewed = await pki.issuance.renewFromCsr(subject(presented, 'reenroll', req.requestId, presented.credentialId), {
      credentialId: presented.credentialId, csrPem: body.csrPem, ttlSecs: body.ttlSecs, idempotencyKey: body.idempotencyKey,
    });
    return json(renewed.idempotentReplay ? 200 : 201, issuedJson(renewed));
  }

  /** Unlabelled: the platform chain (root, platform intermediate, platform leaf issuer); labelled: that tenant's chain. */
  async function cacerts(req: EnrollRequest): Promise<EnrollReply> {
    if (req.label) {
      const chain = await pki.chains.tenant(req.label);
      if (!chain || chain.ders.length === 0) throw notFound(NO_LABEL);
      return est(PKCS7_CERTS_ONLY, certsOnly(chain.ders));
    }
    // The trust bundle as publication caches it (60 s, dropped on authority changes).
    const ders = pemBlocks(await pki.publishing.trustBundle(), ['CERTIFICATE']);
    if (ders.length === 0) throw notFound('certificate authority (none is configured)');
    return est(PKCS7_CERTS_ONLY, certsOnly(ders));
  }

  async function csrattrs(req: EnrollRequest): Promise<EnrollReply> {
    let profileId: string | null = null;
    if (req.label) {
      const chain = await pki.chains.tenant(req.label);
      if (!chain) throw notFound(NO_LABEL);
      profileId = chain.defaultProfileId;
    }
    const profile = await pki.defaultProfile(profileId);
    if (!profile) return { status: 204, headers: {}, body: '' };
    return est('application/csrattrs', csrAttrs(profile.key_algorithms));
  }

  async function simpleenroll(req: EnrollRequest): Promise<EnrollReply> {
    const who = await estSubject(auth, req.headers, req.ip);
    await requireLabel(req, who.tenantId);
    const der = requireEstCsr(req, deps.maxCsrBytes);
    rates.hit(who.entityId, who.tenantId);
    const issued = await pki.issuance.issueFromCsr(subject(who, 'est', req.requestId), {
      csrPem: derToPem(der, 'CERTIFICATE REQUEST'), idempotencyKey: estKey(der),
    });
    return est(PKCS7_CERTS_ONLY, certsOnly([leafDer(issued)]));
  }

  async function simplereenroll(req: EnrollRequest): Promise<EnrollReply> {
    const presented = await certificateSubject(clientCertificates, req.peer);
    await requireLabel(req, presented.tenantId);
    const der = requireEstCsr(req, deps.maxCsrBytes);
    rates.hit(presented.entityId, presented.tenantId);
    const renewed = await pki.issuance.renewFromCsr(subject(presented, 'est', req.requestId, presented.credentialId), {
      credentialId: presented.credentialId, csrPem: derToPem(der, 'CERTIFICATE REQUEST'), idempotencyKey: estKey(der),
    });
    return est(PKCS7_CERTS_ONLY, certsOnly([leafDer(renewed)]));
  }

  async function serverkeygen(req: EnrollRequest): Promise<EnrollReply> {
    if (!deps.generatedKeyIssuance) {
      throw notFound('serverkeygen (server-generated keys are disabled: SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED=false)');
    }
    const who = await estSubject(auth, req.headers, req.ip);
    await requireLabel(req, who.tenantId);
    // The request is still a signed CSR (RFC 7030 4.4.1): verified, its key unused.
    readCsrDer(requireEstCsr(req, deps.maxCsrBytes));
    rates.hit(who.entityId, who.tenantId);
    const issued = await pki.issuance.issueGenerated(subject(who, 'est', req.requestId), {});
    const key = pemBlocks(issued.privateKeyPem ?? '', ['PRIVATE KEY'])[0];
    if (!key) throw new AppError('INTERNAL', 'generated key missing from issuance');
    const { contentType, body } = serverKeygenMultipart(key, leafDer(issued));
    return { status: 200, headers: { 'content-type': contentType }, body };
  }

  const routes: Record<string, { method: string; run: (req: EnrollRequest) => Promise<EnrollReply> }> = {
    '/pki/enroll': { method: 'POST', run: enroll },
    '/pki/reenroll': { method: 'POST', run: reenroll },
    '/.well-known/est/cacerts': { method: 'GET', run: cacerts },
    '/.well-known/est/csrattrs': { method: 'GET', run: csrattrs },
    '/.well-known/est/simpleenroll': { method: 'POST', run: simpleenroll },
    '/.well-known/est/simplereenroll': { method: 'POST', run: simplereenroll },
    '/.well-known/est/serverkeygen': { method: 'POST', run: serverkeygen },
  };

  /** /.well-known/est/<label>/<operation>: the operation's route, told its label. */
  function labelled(path: string): { method: string; run: (req: EnrollRequest) => Promise<EnrollReply> } | undefined {
    if (!path.startsWith(EST)) return undefined;
    const rest = path.slice(EST.length);
    const slash = rest.indexOf('/');
    const route = slash > 0 ? routes[EST + rest.slice(slash + 1)] : undefined;
    if (!route) return undefined;
    const label = rest.slice(0, slash);
    return { method: route.method, run: (req) => route.run({ ...req, label }) };
  }

  return {
    /** Every route (unlabelled form; each EST operation also answers under /.well-known/est/<label>/). */
    list: () => Object.entries(routes).map(([path, r]) => ({ method: r.method, route: path })),
    /** The route for a path, or undefined (404). */
    find: (path: string) => routes[path] ?? labelled(path),
    /** Whether a route reads a body (its size is checked before it is read). */
    takesBody: (path: string) => routes[path]?.method === 'POST',
    invalidMethod: (method: string, path: string) => invalidInput(`${method} is not allowed on ${path}: use ${routes[path]?.method}`),
  };
}

export type EnrollmentRoutes = ReturnType<typeof createEnrollmentRoutes>;
