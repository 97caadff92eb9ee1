// Each issuer's CRL: the stored entries concatenated plus one signature (made in a worker, with the key
// wherever it lives), numbered per issuer in PostgreSQL so every instance publishes the same CRL for the
// same ledger, cached in memory until revocation state changes (publication-coherence) or a quarter of its
// validity is left. Entries stay in the CRL after their certificate expires: nothing is dropped.
import type { Sql } from '../db/client.js';
import { isAppError, unavailable } from '../errors.js';
import type { Logger } from '../log.js';
import { crlDer } from './crl-der.js';
import type { CaKeys } from './keys/types.js';
import type { PublicationCoherence } from './publication-coherence.js';
import type { PublishingIssuer, PublishingIssuers } from './publication-issuers.js';
import * as q from './publication-queries.js';

export interface PublishedCrl {
  der: Buffer;
  crlNumber: string;
  thisUpdate: Date;
  nextUpdate: Date;
  entries: number;
  /** When this instance re-signs it even without a revocation: a quarter of its validity before nextUpdate. */
  refreshAt: number;
}

interface Cached {
  crl: PublishedCrl;
  token: number;
}

export function createCrls(deps: {
  sql: Sql; keys: CaKeys; issuers: PublishingIssuers; coherence: PublicationCoherence; log: Logger; validitySecs: number;
}) {
  const { sql, keys, issuers, coherence, log } = deps;
  const validityMs = deps.validitySecs * 1000;
  const cache = new Map<string, Cached>();
  const loading = new Map<string, { token: number; promise: Promise<PublishedCrl | null> }>();
  const stats = { generated: 0, reusedStored: 0, servedCached: 0 };

  coherence.onChange((ids) => {
    if (ids === null) cache.clear();
    else for (const id of ids) cache.delete(id);
  });

  const refreshAt = (nextUpdate: Date) => nextUpdate.getTime() - validityMs / 4;
  const published = (row: q.CrlStateRow): PublishedCrl => ({
    der: row.crl_der, crlNumber: row.crl_number, thisUpdate: row.this_update, nextUpdate: row.next_update, entries: row.entry_count,
    refreshAt: refreshAt(row.next_update),
  });
  /** The stored CRL covers exactly the ledger as it is now (append-only: same highest id and same count). */
  const covers = (row: q.CrlStateRow | undefined, ledger: { mark: string; count: number }) =>
    !!row && row.ledger_mark === ledger.mark && row.entry_count === ledger.count;

  /** Under the issuer's lock: re-checks (another instance may have just signed it), else numbers, builds, signs, stores. */
  async function generate(issuer: PublishingIssuer): Promise<PublishedCrl> {
    return sql.begin(async (tx) => {
      await q.lockIssuerCrl(tx, issuer.id);
      const state = await q.selectCrlState(tx, issuer.id);
      // One statement: the entries, their count and highest id from one snapshot.
      const ledger = await q.selectCrlEntries(tx, issuer.id);
      if (state && covers(state, ledger) && Date.now() < refreshAt(state.next_update)) return published(state);
      const thisUpdate = new Date(Math.floor(Date.now() / 1000) * 1000);
      const nextUpdate = new Date(thisUpdate.getTime() + validityMs);
      const crlNumber = state ? BigInt(state.crl_number) + 1n : 1n;
      const der = await crlDer({
        signatureAlgorithm: issuer.signatureAlgorithm, issuerName: issuer.issuerName, issuerKeyId: issuer.subjectKeyId,
        thisUpdate, nextUpdate, crlNumber, entries: ledger.entries,
      }, (tbs) => keys.sign(issuer.keyRef, tbs));
      await q.upsertCrlState(tx, {
        issuer_id: issuer.id, crl_number: crlNumber, this_update: thisUpdate, next_update: nextUpdate, ledger_mark: ledger.mark,
        entry_count: ledger.count, crl_der: der,
      });
      stats.generated++;
      return { der, crlNumber: crlNumber.toString(), thisUpdate, nextUpdate, entries: ledger.count, refreshAt: refreshAt(nextUpdate) };
    });
  }

  async function load(id: string): Promise<PublishedCrl | null> {
    const token = coherence.token(id);
    const issuer = await issuers.get(id);
    if (!issuer) return null;
    const [state, ledger] = await Promise.all([q.selectCrlState(sql, id), q.selectLedgerMark(sql, id)]);
    let crl: PublishedCrl;
    if (state && covers(state, ledger) && Date.now() < refreshAt(state.next_update)) {
      crl = published(state);
      stats.reusedStored++;
    } else {
      try {
        crl = await generate(issuer);
      } catch (err) {
        // The key cannot sign now (breaker open, token down): a stored CRL of the same revocation state
        // is still true until its nextUpdate; one that misses a revocation is never served.
        if (state && covers(state, ledger) && Date.now() < state.next_update.getTime()) {
          log.warn('CRL re-signing failed; serving the stored CRL until its nextUpdate', { issuer_id: id, err: String(err) });
          return published(state);
        }
        if (isAppError(err)) throw err;
        log.error('CRL generation failed', { issuer_id: id, err });
        throw unavailable('the CRL cannot be signed now');
      }
    }
    if (coherence.token(id) === token && coherence.cacheable(id)) cache.set(id, { crl, token });
    return crl;
  }

  return {
    /** The issuer's current CRL, or null when `id` is not a publishing issuer. */
    get(id: string): Promise<PublishedCrl | null> {
      const hit = cache.get(id);
      if (hit && hit.token === coherence.token(id) && Date.now() < hit.crl.refreshAt && coherence.cacheable(id)) {
        stats.servedCached++;
        return Promise.resolve(hit.crl);
      }
      // Requests arriving while one loads share it (a burst after a revocation signs once), unless the
      // issuer changed since that load began: it may miss the change.
      const token = coherence.token(id);
      const pending = loading.get(id);
      if (pending && pending.token === token) return pending.promise;
      const promise = load(id).finally(() => {
        if (loading.get(id)?.promise === promise) loading.delete(id);
      });
      loading.set(id, { token, promise });
      return promise;
    },
    stats,
  };
}

export type Crls = ReturnType<typeof createCrls>;
