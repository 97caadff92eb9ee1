// The public certificate routes (no authentication, per-IP limited as public_routes): the trust bundle,
// each issuer's certificate, CRL and OCSP responder (POST, and the GET form of RFC 6960 appendix A).
import type { HttpServer } from '../../http/server.js';
import type { RateLimiter } from '../../http/rate-limit.js';
import { errorReply, type HttpReply, type HttpRequest } from '../../http/types.js';
import { notFound } from '../../errors.js';
import type { Crls } from './crl.js';
import type { Ocsp, OcspAnswer } from './ocsp.js';
import type { PublishingIssuers } from './publication-issuers.js';

/** What the routes answer from (publication.ts builds it; naming it here keeps the import one way). */
export interface PublicationSources {
  issuers: PublishingIssuers;
  crls: Crls;
  ocsp: Ocsp;
  trustBundle(): Promise<string>;
}

/** A reply and how many seconds it stays true as it is, for this request (0: answer afresh every time). */
export interface ReusableReply {
  reply: HttpReply;
  reusableSecs: number;
}

/** An OCSP request is a few hundred bytes; a generous bound that still refuses junk early. */
export const OCSP_BODY_LIMIT = 16 * 1024;
const HEADERS = ['content-type', 'content-length', 'x-request-id', 'x-forwarded-for'];
const OCSP_GET_PREFIX = /^\/certs\/issuers\/[^/]+\/ocsp\//;
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

const PEM = Object.freeze({ 'content-type': 'application/pem-certificate-chain', 'cache-control': 'public, max-age=60' });
const NO_STORE_OCSP = Object.freeze({ 'content-type': 'application/ocsp-response', 'cache-control': 'no-store' });

/** The base64 request of the GET form: percent-escapes undone ('+', '/', '=' arrive escaped or not), base64 or base64url. */
function getFormRequest(path: string): Buffer | null {
  let encoded = path.replace(OCSP_GET_PREFIX, '');
  try {
    encoded = decodeURIComponent(encoded);
  } catch {
    return null;
  }
  return BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : null;
}

/** The public certificate answers, independent of the listener that carries them. */
export function publicationHandlers(publication: PublicationSources) {
  const ocspHeaders = (answer: OcspAnswer, cacheable: boolean): HttpReply => {
    if (!cacheable || answer.maxAgeSecs <= 0) return { status: 200, headers: NO_STORE_OCSP, body: answer.der };
    // RFC 5019 6.2: a GET answer may be kept by HTTP caches until shortly before it is re-signed.
    return {
      status: 200,
      headers: { 'content-type': 'application/ocsp-response', 'cache-control': `public, max-age=${answer.maxAgeSecs}, no-transform, must-revalidate` },
      body: answer.der,
    };
  };
  // Synchronous when the answer is (cached, or signed on this thread): the listener replies inside its callback.
  const ocspReply = (issuerId: string, body: Buffer | null, cacheable: boolean): HttpReply | Promise<HttpReply> => {
    const answer = body ? publication.ocsp.answer(issuerId, body) : publication.ocsp.malformed();
    return answer instanceof Promise ? answer.then((a) => ocspHeaders(a, cacheable)) : ocspHeaders(answer, cacheable);
  };

  /** The reply with how long it may be served again as it is (0: never): for a listener that keeps answers. */
  const ocspReusable = (issuerId: string, body: Buffer | null, cacheable: boolean): ReusableReply | Promise<ReusableReply> => {
    const answer = body ? publication.ocsp.answer(issuerId, body) : publication.ocsp.malformed();
    const reusable = (a: OcspAnswer): ReusableReply => ({ reply: ocspHeaders(a, cacheable), reusableSecs: a.maxAgeSecs });
    return answer instanceof Promise ? answer.then(reusable) : reusable(answer);
  };

  return {
    async trustBundle(): Promise<HttpReply> {
      return { status: 200, headers: PEM, body: await publication.trustBundle() };
    },
    async issuerCertificate(issuerId: string): Promise<HttpReply> {
      const issuer = await publication.issuers.get(issuerId);
      if (!issuer) return errorReply(notFound('issuer'));
      return { status: 200, headers: { 'content-type': 'application/pkix-cert', 'cache-control': 'public, max-age=3600' }, body: issuer.context.info.der };
    },
    async crl(issuerId: string): Promise<HttpReply> {
      const crl = await publication.crls.get(issuerId);
      if (!crl) return errorReply(notFound('issuer'));
      const maxAge = Math.max(0, Math.floor((crl.refreshAt - Date.now()) / 1000));
      return {
        status: 200,
        headers: {
          'content-type': 'application/pkix-crl',
          // Short: a revocation replaces the CRL at once here, an HTTP cache would keep the old one.
          'cache-control': `public, max-age=${Math.min(maxAge, 60)}`,
          'last-modified': crl.thisUpdate.toUTCString(),
          etag: `"${crl.crlNumber}"`,
        },
        body: crl.der,
      };
    },
    ocspPost: (issuerId: string, body: Buffer): HttpReply | Promise<HttpReply> => ocspReply(issuerId, body, false),
    /** `path`: the whole request path, /certs/issuers/<id>/ocsp/<base64 request>. */
    ocspGet: (issuerId: string, path: string) => ocspReply(issuerId, getFormRequest(path), true),
    /** ocspPost and ocspGet with how long the answer holds unchanged (publication-thread.ts keeps them). */
    ocspPostReusable: (issuerId: string, body: Buffer) => ocspReusable(issuerId, body, false),
    ocspGetReusable: (issuerId: string, path: string) => ocspReusable(issuerId, getFormRequest(path), true),
  };
}

export type PublicationHandlers = ReturnType<typeof publicationHandlers>;

/** On a uWS listener (the management API): HTTP/1.1 clients. */
export function registerPublicationRoutes(server: HttpServer, deps: { handlers: PublicationHandlers; limiter: RateLimiter }): void {
  const { handlers: h, limiter } = deps;
  const plain = { headers: HEADERS };
  const id = (req: HttpRequest) => req.params[0] as string;
  server.route('GET', '/certs/trust-bundle.pem', limiter.wrap('public_routes', () => h.trustBundle()), plain);
  server.route('GET', '/certs/issuers/:issuer_id/ca.crt', limiter.wrap('public_routes', (req) => h.issuerCertificate(id(req))), plain);
  server.route('GET', '/certs/issuers/:issuer_id/crl', limiter.wrap('public_routes', (req) => h.crl(id(req))), plain);
  server.route('POST', '/certs/issuers/:issuer_id/ocsp', limiter.wrap('public_routes', (req) => h.ocspPost(id(req), req.body)),
    { headers: HEADERS, bodyLimit: OCSP_BODY_LIMIT });
  server.route('GET', '/certs/issuers/:issuer_id/ocsp/*', limiter.wrap('public_routes', (req) => h.ocspGet(id(req), req.path)), plain);
}
