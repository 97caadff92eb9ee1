// The OCSP responder (RFC 6960) of each publishing issuer, signing with the issuer's own key. Answers to
// requests without a nonce are signed once and served from memory by the request's exact bytes until a
// quarter of their validity is left or the issuer's revocation state changes (publication-coherence), so
// the common request costs a map lookup and no parse. Nonce requests get a fresh signature: with the issuer
// and the serial's state cached and an encrypted_database key, on this thread and synchronously (request
// and response through the templates of ocsp-template.ts), since a worker task costs more than the one
// signature at the concurrency OCSP clients bring; else through CaKeys.sign (gathered into worker tasks,
// PKCS#11 keys always). Whatever goes wrong is an OCSPResponse
// with an error status (malformedRequest, unauthorized, tryLater, internalError), never an HTTP 500.
import { LRUCache } from 'lru-cache';
import type { Sql } from '../../db/client.js';
import { isAppError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { CaKeys } from '../keys/types.js';
import { parseOcspRequest, unsuccessfulResponseDer, type CertRequest, type CertStatus, type ParsedRequest } from './ocsp-der.js';
import { matchRequestTemplate, responseDataTemplate, responseTemplate } from './ocsp-template.js';
import type { PublicationCoherence } from './publication-coherence.js';
import type { PublishingIssuer, PublishingIssuers } from './publication-issuers.js';
import { selectSerialStatus } from './publication-queries.js';

/** Signed answers kept: ~1 KB each with the issuer's chain, so about 50 MB at most. */
const MAX_RESPONSES = 50_000;
/** Serial states kept (good or revoked; unknown is never cached: a serial may be issued later). */
const MAX_STATUSES = 200_000;
const UNKNOWN: CertStatus = Object.freeze({ status: 'unknown' });
/** Request bodies longer than this are answered but not used as cache keys. */
const MAX_KEYED_BODY = 1024;
/** id-pkix-ocsp-nonce as an encoded OID (RFC 8954): the bytes every nonce request carries. */
const NONCE_EXTENSION_OID = Buffer.from('06092b0601050507300102', 'hex');

export interface OcspAnswer {
  der: Buffer;
  /** Seconds a shared cache may keep it (GET form); 0 for nonce answers and errors. */
  maxAgeSecs: number;
}

interface CachedAnswer {
  der: Buffer;
  token: number;
  refreshAt: number;
  nextUpdate: number;
}

export function createOcsp(deps: {
  sql: Sql; keys: CaKeys; issuers: PublishingIssuers; coherence: PublicationCoherence; log: Logger; validitySecs: number;
}) {
  const { sql, keys, issuers, coherence, log } = deps;
  const validityMs = deps.validitySecs * 1000;
  const answers = new LRUCache<string, CachedAnswer>({ max: MAX_RESPONSES });
  const statuses = new LRUCache<string, { state: CertStatus; token: number }>({ max: MAX_STATUSES });
  const stats = { cached: 0, signed: 0, malformed: 0, tryLater: 0 };

  coherence.onChange((ids) => {
    // Answers check their token when read; serial states named by a revocation go at once.
    if (ids === null) statuses.clear();
  });

  const error = (status: 'malformedRequest' | 'unauthorized' | 'tryLater' | 'internalError'): OcspAnswer =>
    ({ der: unsuccessfulResponseDer(status), maxAgeSecs: 0 });

  /** The state of `cert` when known without the database (not ours, or cached under the current token). */
  function knownStatus(issuer: PublishingIssuer, cert: CertRequest): CertStatus | undefined {
    if (!cert.hash || !cert.serial || !issuer.matches(cert.hash, cert.issuerNameHash, cert.issuerKeyHash)) return UNKNOWN;
    const hit = statuses.get(`${issuer.id}|${cert.serial}`);
    return hit && hit.token === coherence.token(issuer.id) ? hit.state : undefined;
  }

  async function statusOf(issuer: PublishingIssuer, cert: CertRequest): Promise<CertStatus> {
    const known = knownStatus(issuer, cert);
    if (known) return known;
    const key = `${issuer.id}|${cert.serial}`;
    const token = coherence.token(issuer.id);
    const row = await selectSerialStatus(sql, issuer.id, cert.serial as string);
    const state: CertStatus = row.revoked_at
      ? { status: 'revoked', revokedAt: row.revoked_at, reason: row.reason ?? 'unspecified' }
      : row.issued ? { status: 'good' } : UNKNOWN;
    if (state.status !== 'unknown' && coherence.token(issuer.id) === token && coherence.cacheable(issuer.id)) statuses.set(key, { state, token });
    return state;
  }

  /** The to-be-signed ResponseData, from the issuer's parts and this answer's slots (ocsp-template.ts). */
  function toBeSigned(issuer: PublishingIssuer, request: ParsedRequest, states: CertStatus[], now: number) {
    const nextUpdate = now + validityMs;
    const answers = request.certs.map((c, i) => ({ certIdDer: c.certIdDer, state: states[i] as CertStatus }));
    return { tbs: responseDataTemplate(issuer.responderId, now, answers, now, nextUpdate, request.nonce), nextUpdate };
  }

  /** The signed answer, kept for these request bytes when it may be (no nonce, every state known to us). */
  function finish(issuer: PublishingIssuer, request: ParsedRequest, states: CertStatus[], signed: { tbs: Buffer; nextUpdate: number }, signature: Buffer, cache: { key: string; token: number } | null): OcspAnswer {
    stats.signed++;
    const der = responseTemplate(signed.tbs, issuer.signatureAlgorithm, signature, issuer.responseCerts);
    const refreshAt = signed.nextUpdate - validityMs / 4;
    // Kept only when nothing about the issuer moved while it was made and no revocation of it is pending;
    // maxAgeSecs says the same to whoever reuses it (HTTP caches, the listener's thread): an answer made
    // while a revocation was uncommitted must not outlive the commit anywhere.
    const kept = cache !== null && !request.nonce && states.every((s) => s.status !== 'unknown')
      && coherence.token(issuer.id) === cache.token && coherence.cacheable(issuer.id);
    if (kept) answers.set(cache.key, { der, token: cache.token, refreshAt, nextUpdate: signed.nextUpdate });
    return { der, maxAgeSecs: kept ? Math.floor((refreshAt - Date.now()) / 1000) : 0 };
  }

  /** The answer through the database (states not cached), the registry (issuer not loaded) or a worker (key not signable here). */
  async function answerSlowly(issuerId: string, request: ParsedRequest, cache: { key: string; token: number } | null, hit: CachedAnswer | undefined): Promise<OcspAnswer> {
    let issuer: PublishingIssuer | null;
    try {
      issuer = await issuers.get(issuerId);
    } catch (err) {
      log.error('loading an OCSP issuer failed', { issuer_id: issuerId, err });
      return error('internalError');
    }
    // Not an issuer of ours: RFC 6960 2.3 answers unauthorized (this responder is not authoritative).
    if (!issuer) return error('unauthorized');
    try {
      const states = await Promise.all(request.certs.map((c) => statusOf(issuer, c)));
      const signed = toBeSigned(issuer, request, states, Math.floor(Date.now() / 1000) * 1000);
      const signature = keys.signInProcess(issuer.keyRef, signed.tbs) ?? await keys.sign(issuer.keyRef, signed.tbs);
      return finish(issuer, request, states, signed, signature, cache);
    } catch (err) {
      // The key cannot sign now (PKCS#11 breaker open, token slow, queue full): the client should retry.
      if (isAppError(err) && (err.kind === 'UNAVAILABLE' || err.kind === 'RATE_LIMITED')) {
        // An answer signed earlier for the same state still holds until its nextUpdate.
        if (hit && hit.token === coherence.token(issuerId) && Date.now() < hit.nextUpdate && coherence.cacheable(issuerId)) {
          stats.cached++;
          return { der: hit.der, maxAgeSecs: 0 };
        }
        stats.tryLater++;
        return error('tryLater');
      }
      log.error('answering an OCSP request failed', { issuer_id: issuerId, err });
      return error('internalError');
    }
  }

  return {
    /** The answer to a request that could not even be read (a GET form that is not base64). */
    malformed(): OcspAnswer {
      stats.malformed++;
      return error('malformedRequest');
    },
    /**
     * The OCSPResponse for `body` (a DER OCSPRequest) addressed to issuer `issuerId`: synchronous when
     * the issuer and the states are cached and the key signs on this thread (a nonce answer then costs a
     * template match, one signature and a template fill), a promise otherwise.
     */
    answer(issuerId: string, body: Buffer): OcspAnswer | Promise<OcspAnswer> {
      // A request with a nonce is never answered from the cache: no key is built for it (a string of the
      // whole body, hashed on lookup). A body that only looks like one is answered correctly, unkept.
      const keyed = body.length > 0 && body.length <= MAX_KEYED_BODY && body.indexOf(NONCE_EXTENSION_OID) < 0;
      const cacheKey = keyed ? `${issuerId}|${body.toString('latin1')}` : '';
      let hit: CachedAnswer | undefined;
      if (keyed) {
        hit = answers.get(cacheKey);
        if (hit && hit.token === coherence.token(issuerId) && Date.now() < hit.refreshAt && coherence.cacheable(issuerId)) {
          stats.cached++;
          return { der: hit.der, maxAgeSecs: Math.max(0, Math.floor((hit.refreshAt - Date.now()) / 1000)) };
        }
      }
      const request = matchRequestTemplate(body) ?? parseOcspRequest(body);
      if (!request) {
        stats.malformed++;
        return error('malformedRequest');
      }
      const cache = keyed ? { key: cacheKey, token: coherence.token(issuerId) } : null;
      const issuer = issuers.peek(issuerId);
      if (issuer === null) return error('unauthorized');
      if (issuer) {
        const states = request.certs.map((c) => knownStatus(issuer, c));
        if (states.every((s) => s !== undefined)) {
          const signed = toBeSigned(issuer, request, states as CertStatus[], Math.floor(Date.now() / 1000) * 1000);
          const signature = keys.signInProcess(issuer.keyRef, signed.tbs);
          if (signature) return finish(issuer, request, states as CertStatus[], signed, signature, cache);
        }
      }
      return answerSlowly(issuerId, request, cache, hit);
    },
    stats,
  };
}

export type Ocsp = ReturnType<typeof createOcsp>;
