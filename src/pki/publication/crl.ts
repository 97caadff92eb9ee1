// Each issuer's CRL: the stored entries concatenated plus one signature (made in a worker, with the key
// wherever it lives), numbered per issuer in PostgreSQL with its signature so every instance publishes the
// same CRL for the same ledger (rebuilt by concatenation, not re-signed), cached in memory until
// revocation state changes (publication-coherence) or a quarter of its validity is left. The entries read
// are held per issuer, so after a revocation only the new entries are read. Entries stay in the CRL after
// their certificate expires: nothing is dropped.
import { LRUCache } from 'lru-cache';
import type { Queryable, Sql } from '../../db/client.js';
import { isAppError, unavailable } from '../../errors.js';
import type { Logger } from '../../log.js';
import { crlDer } from './crl-der.js';
import type { CaKeys } from '../keys/types.js';
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

/** The issuer's entries as last read, kept so a new revocation costs reading the new entries, not all. */
interface HeldEntries {
  mark: string;
  count: number;
  entries: Buffer;
}

/** Held entries of all issuers together stay under this (100,000 entries are ~4.6 MB). */
const HELD_BYTES = 256 * 1024 * 1024;

export function createCrls(deps: {
  sql: Sql; keys: CaKeys; issuers: PublishingIssuers; coherence: PublicationCoherence; log: Logger; validitySecs: number;
}) {
  const { sql, keys, issuers, coherence, log } = deps;
  const validityMs = deps.validitySecs * 1000;
  const cache = new Map<string, Cached>();
  const held = new LRUCache<string, HeldEntries>({ maxSize: HELD_BYTES, sizeCalculation: (h) => h.entries.length + 64 });
  const loading = new Map<string, { token: number; promise: Promise<PublishedCrl | null> }>();
  const stats = { generated: 0, reusedStored: 0, servedCached: 0, fullReads: 0 };

  coherence.onChange((ids) => {
    if (ids === null) cache.clear();
    else for (const id of ids) cache.delete(id);
  });

  const refreshAt = (nextUpdate: Date) => nextUpdate.getTime() - validityMs / 4;

  /** The issuer's whole ledger of CRL entries and its position: the held entries plus those after them. */
  async function ledgerOf(db: Queryable, issuerId: string): Promise<HeldEntries> {
    const h = held.get(issuerId);
    let read = await q.selectLedgerSince(db, issuerId, h?.mark ?? '0');
    let entries: Buffer;
    if (!h) {
      entries = read.entries;
      stats.fullReads++;
    } else if (read.countThrough === h.count) entries = read.entries.length ? Buffer.concat([h.entries, read.entries]) : h.entries;
    else {
      // An entry with a lower id committed after we read (ids are taken at insert, not at commit): read all.
      read = await q.selectLedgerSince(db, issuerId, '0');
      entries = read.entries;
      stats.fullReads++;
    }
    const now: HeldEntries = { mark: read.mark, count: read.count, entries };
    held.set(issuerId, now);
    return now;
  }

  /** The stored CRL covers exactly the ledger as it is now (append-only: same highest id and same count). */
  const covers = (row: q.CrlStateRow | undefined, ledger: HeldEntries): row is q.CrlStateRow =>
    !!row && row.ledger_mark === ledger.mark && row.entry_count === ledger.count;

  const partsOf = (issuer: PublishingIssuer, ledger: HeldEntries, number: bigint, thisUpdate: Date, nextUpdate: Date) => ({
    signatureAlgorithm: issuer.signatureAlgorithm, issuerName: issuer.issuerName, issuerKeyId: issuer.subjectKeyId,
    thisUpdate, nextUpdate, crlNumber: number, entries: ledger.entries,
  });

  /** The stored CRL rebuilt: the same TBS (same entries, fields and issuer), so its stored signature holds. */
  async function rebuilt(issuer: PublishingIssuer, state: q.CrlStateRow, ledger: HeldEntries): Promise<PublishedCrl> {
    const der = await crlDer(partsOf(issuer, ledger, BigInt(state.crl_number), state.this_update, state.next_update), async () => state.signature);
    return { der, crlNumber: state.crl_number, thisUpdate: state.this_update, nextUpdate: state.next_update, entries: state.entry_count, refreshAt: refreshAt(state.next_update) };
  }

  /** Under the issuer's lock: re-checks (another instance may have just signed it), else numbers, builds, signs, stores. */
  async function generate(issuer: PublishingIssuer): Promise<PublishedCrl> {
    return sql.begin(async (tx) => {
      await q.lockIssuerCrl(tx, issuer.id);
      const state = await q.selectCrlState(tx, issuer.id);
      const ledger = await ledgerOf(tx, issuer.id);
      if (covers(state, ledger) && Date.now() < refreshAt(state.next_update)) return rebuilt(issuer, state, ledger);
      const thisUpdate = new Date(Math.floor(Date.now() / 1000) * 1000);
      const nextUpdate = new Date(thisUpdate.getTime() + validityMs);
      const crlNumber = state ? BigInt(state.crl_number) + 1n : 1n;
      let signature: Buffer | undefined;
      const der = await crlDer(partsOf(issuer, ledger, crlNumber, thisUpdate, nextUpdate), async (tbs) => (signature = await keys.sign(issuer.keyRef, tbs)));
      await q.upsertCrlState(tx, {
        issuer_id: issuer.id, crl_number: crlNumber, this_update: thisUpdate, next_update: nextUpdate, ledger_mark: ledger.mark,
        entry_count: ledger.count, signature: signature as Buffer,
      });
      stats.generated++;
      return { der, crlNumber: crlNumber.toString(), thisUpdate, nextUpdate, entries: ledger.count, refreshAt: refreshAt(nextUpdate) };
    });
  }

  async function load(id: string): Promise<PublishedCrl | null> {
    const token = coherence.token(id);
    const issuer = await issuers.get(id);
    if (!issuer) return null;
    const state = await q.selectCrlState(sql, id);
    const ledger = await ledgerOf(sql, id);
    let crl: PublishedCrl;
    if (covers(state, ledger) && Date.now() < refreshAt(state.next_update)) {
      crl = await rebuilt(issuer, state, ledger);
      stats.reusedStored++;
    } else {
      try {
        crl = await generate(issuer);
      } catch (err) {
        // The key cannot sign now (breaker open, token down): a stored CRL of the same revocation state
        // is still true until its nextUpdate; one that misses a revocation is never served.
        if (covers(state, ledger) && Date.now() < state.next_update.getTime()) {
          log.warn('CRL re-signing failed; serving the stored CRL until its nextUpdate', { issuer_id: id, err: String(err) });
          return rebuilt(issuer, state, ledger);
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
