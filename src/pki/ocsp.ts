// The OCSP responder (RFC 6960) of each publishing issuer, signing with the issuer's own key. Answers to
// requests without a nonce are signed once and served from memory by the request's exact bytes until a
// quarter of their validity is left or the issuer's revocation state changes (publication-coherence), so
// the common request costs a map lookup and no parse. Nonce requests get a fresh signature; those that
// arrive together share one worker task (CaKeys gathers them). Whatever goes wrong is an OCSPResponse
// with an error status (malformedRequest, unauthorized, tryLater, internalError), never an HTTP 500.
import { LRUCache } from 'lru-cache';
import type { Sql } from '../db/client.js';
import { isAppError } from '../errors.js';
import type { Logger } from '../log.js';
import type { CaKeys } from './keys/types.js';
import {
  parseOcspRequest, responseDataDer, singleResponseDer, successfulResponseDer, unsuccessfulResponseDer, type CertRequest, type CertStatus,
} from './ocsp-der.js';
import type { PublicationCoherence } from './publication-coherence.js';
import type { PublishingIssuer, PublishingIssuers } from './publication-issuers.js';
import { selectSerialStatus } from './publication-queries.js';

/** Signed answers kept: ~1 KB each with the issuer's chain, so about 50 MB at most. */
const MAX_RESPONSES = 50_000;
/** Serial states kept (good or revoked; unknown is never cached: a serial may be issued later). */
const MAX_STATUSES = 200_000;
/** Request bodies longer than this are answered but not used as cache keys. */
const MAX_KEYED_BODY = 1024;

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

  async function statusOf(issuer: PublishingIssuer, cert: CertRequest): Promise<CertStatus> {
    if (!cert.hash || !cert.serial || !issuer.matches(cert.hash, cert.issuerNameHash, cert.issuerKeyHash)) return { status: 'unknown' };
    const key = `${issuer.id}|${cert.serial}`;
    const token = coherence.token(issuer.id);
    const hit = statuses.get(key);
    if (hit && hit.token === token) return hit.state;
    const row = await selectSerialStatus(sql, issuer.id, cert.serial);
    const state: CertStatus = row.revoked_at
      ? { status: 'revoked', revokedAt: row.revoked_at, reason: row.reason ?? 'unspecified' }
      : row.issued ? { status: 'good' } : { status: 'unknown' };
    if (state.status !== 'unknown' && coherence.token(issuer.id) === token && coherence.cacheable(issuer.id)) statuses.set(key, { state, token });
    return state;
  }

  async function sign(issuer: PublishingIssuer, certs: CertRequest[], states: CertStatus[], nonce: Buffer | null, now: Date) {
    const nextUpdate = new Date(Math.floor(now.getTime() / 1000) * 1000 + validityMs);
    const singles = certs.map((c, i) => singleResponseDer(c.certIdDer, states[i] as CertStatus, now, nextUpdate));
    const tbs = responseDataDer(issuer.responderId, now, singles, nonce);
    const signature = await keys.sign(issuer.keyRef, tbs);
    stats.signed++;
    return { der: successfulResponseDer(tbs, issuer.signatureAlgorithm, signature, issuer.responseCerts), nextUpdate };
  }

  return {
    /** The answer to a request that could not even be read (a GET form that is not base64). */
    malformed(): OcspAnswer {
      stats.malformed++;
      return error('malformedRequest');
    },
    /**
     * The answer cached for exactly these request bytes, if still good: synchronous, so the listener
     * replies inside its own callback (no promise, no deferred write) for the common request.
     */
    cached(issuerId: string, body: Buffer): OcspAnswer | undefined {
      if (body.length === 0 || body.length > MAX_KEYED_BODY) return undefined;
      const hit = answers.get(`${issuerId}|${body.toString('latin1')}`);
      if (!hit || hit.token !== coherence.token(issuerId) || Date.now() >= hit.refreshAt || !coherence.cacheable(issuerId)) return undefined;
      stats.cached++;
      return { der: hit.der, maxAgeSecs: Math.max(0, Math.floor((hit.refreshAt - Date.now()) / 1000)) };
    },
    /** The OCSPResponse for `body` (a DER OCSPRequest) addressed to issuer `issuerId`. */
    async answer(issuerId: string, body: Buffer): Promise<OcspAnswer> {
      const keyed = body.length > 0 && body.length <= MAX_KEYED_BODY;
      const cacheKey = keyed ? `${issuerId}|${body.toString('latin1')}` : '';
      let hit: CachedAnswer | undefined;
      if (keyed) {
        hit = answers.get(cacheKey);
        if (hit && hit.token === coherence.token(issuerId) && Date.now() < hit.refreshAt && coherence.cacheable(issuerId)) {
          stats.cached++;
          return { der: hit.der, maxAgeSecs: Math.max(0, Math.floor((hit.refreshAt - Date.now()) / 1000)) };
        }
      }
      const request = parseOcspRequest(body);
      if (!request) {
        stats.malformed++;
        return error('malformedRequest');
      }
      const token = coherence.token(issuerId);
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
        const now = new Date(Math.floor(Date.now() / 1000) * 1000);
        const signed = await sign(issuer, request.certs, states, request.nonce, now);
        const cacheable = keyed && !request.nonce && states.every((s) => s.status !== 'unknown');
        const refreshAt = signed.nextUpdate.getTime() - validityMs / 4;
        if (cacheable && coherence.token(issuerId) === token && coherence.cacheable(issuerId)) {
          answers.set(cacheKey, { der: signed.der, token, refreshAt, nextUpdate: signed.nextUpdate.getTime() });
        }
        return { der: signed.der, maxAgeSecs: cacheable ? Math.floor((refreshAt - Date.now()) / 1000) : 0 };
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
    },
    stats,
  };
}

export type Ocsp = ReturnType<typeof createOcsp>;
