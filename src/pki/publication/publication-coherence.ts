// When cached CRLs and OCSP answers of an issuer stop being true: one counter per issuer (a token) that
// every revocation and authority change moves, here before the revoking call returns and on every other
// instance through NOTIFY (pki.revoked, pki.changed); a lost LISTEN connection moves them all. A cache
// entry stores the token it was made under and is served only while the token is unchanged, and a load
// that saw the token move while it ran is not stored: the way the registry guards its loads.
import type { NotifyHub } from '../../db/notify-hub.js';
import { CHANGED_TOPIC, type Change } from '../authorities/registry.js';
import { REVOKED_TOPIC, type RevokedNotice } from '../revocation/revocation-events.js';

/** How long an issuer stays uncached after a revocation was written in a transaction this instance cannot see commit. */
const SUSPEND_MS = 10_000;

export interface PublicationCoherence {
  /** The issuer's current token: entries made under another are stale. */
  token(issuerId: string): number;
  /** False while a revocation of the issuer is written but not yet known to be committed (no caching then). */
  cacheable(issuerId: string): boolean;
  /** Inside a revoking transaction: the issuers' entries stop serving and caching until commit is known. */
  pending(issuerIds: Iterable<string>): void;
  /** After the revoking transaction committed (before the call returns): the issuers' entries are stale. */
  committed(issuerIds: Iterable<string>): void;
  /** Told of every change: the issuers affected (null: all), and for revocations the serials. */
  onChange(listener: (issuers: string[] | null, serials: { issuerId: string; serialNumber: string }[]) => void): void;
  /** Drops everything (the LISTEN connection came back; tests). */
  dropAll(): void;
  readonly stats: { changes: number; dropsAll: number };
}

export function createPublicationCoherence(hub: NotifyHub): PublicationCoherence {
  let counter = 0;
  let allAt = 0;
  const issuers = new Map<string, number>();
  const suspended = new Map<string, number>();
  const listeners: ((issuers: string[] | null, serials: { issuerId: string; serialNumber: string }[]) => void)[] = [];
  const stats = { changes: 0, dropsAll: 0 };

  function moved(ids: string[] | null, serials: { issuerId: string; serialNumber: string }[] = []): void {
    stats.changes++;
    counter++;
    if (ids === null) {
      allAt = counter;
      issuers.clear();
      suspended.clear();
      stats.dropsAll++;
    } else {
      for (const id of ids) issuers.set(id, counter);
    }
    for (const l of listeners) l(ids, serials);
  }

  const self: PublicationCoherence = {
    token: (id) => Math.max(issuers.get(id) ?? 0, allAt),
    cacheable(id) {
      const until = suspended.get(id);
      if (until === undefined) return true;
      if (until > Date.now()) return false;
      suspended.delete(id);
      return true;
    },
    pending(ids) {
      const list = [...new Set(ids)];
      for (const id of list) suspended.set(id, Date.now() + SUSPEND_MS);
      moved(list);
    },
    committed(ids) {
      const list = [...new Set(ids)];
      for (const id of list) suspended.delete(id);
      moved(list);
    },
    onChange: (l) => void listeners.push(l),
    dropAll: () => moved(null),
    stats,
  };

  hub.subscribe(REVOKED_TOPIC, (payload) => {
    const notice = payload as RevokedNotice;
    if (notice.all || !Array.isArray(notice.revoked)) return moved(null);
    const ids = [...new Set(notice.revoked.map((r) => r.issuerId))];
    // The NOTIFY is sent at commit: what was pending here is committed now.
    for (const id of ids) suspended.delete(id);
    moved(ids, notice.revoked);
  });
  hub.subscribe(CHANGED_TOPIC, (payload) => {
    const change = payload as Change;
    // Authorities retired, rotated or provisioned: their certificates, chains and keys may differ.
    if (change.all || change.tenants?.length) return moved(null);
    if (change.authorities?.length) moved(change.authorities);
  });
  hub.onReconnect(() => moved(null));
  return self;
}
