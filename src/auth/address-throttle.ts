// Failed secrets that name no identity and carry their own entropy (device keys on HTTP, MQTT and CoAP,
// bearer tokens on the enrollment listener), counted per client address in memory, per instance.
//
// The same rule as login's address counter (login-throttle.ts): past SVC_LOGIN_FAILURE_IP_LIMIT failures
// from one address in a window, that address's lookups are held back by a doubling delay of at most
// SVC_LOGIN_FAILURE_MAX_DELAY_SECS, never refused. A key of 128+ random bits cannot be guessed, so there is
// no identity counter to lock anyone out with; what this bounds is the lookups (a keyed hash and a query
// each) one address can make the service do. Only lookups are held: a key this instance verified before
// answers from the cache without coming here, so the successful publish path costs nothing more.
import { setTimeout as sleep } from 'node:timers/promises';
import { LRUCache } from 'lru-cache';
import { addressOf, holdMs, type FailureCount } from './login-throttle.js';

export interface AddressThrottle {
  /** Waits while the address is held back (resolves at once, without a timer, when it is not). */
  hold(ip: string | null): Promise<void> | undefined;
  /** Counts one failed secret from the address. */
  failed(ip: string | null): void;
}

export function createAddressThrottle(deps: {
  settings: { addressLimit: number; windowSecs: number; maxDelaySecs: number; maxAddresses: number };
  addressKey: (ip: string) => string;
}): AddressThrottle {
  const { settings } = deps;
  // Bounded: past maxAddresses the least recently failing address is forgotten (it starts afresh), so
  // callers from ever new addresses cost memory up to the bound and no more.
  const counts = new LRUCache<string, FailureCount>({ max: settings.maxAddresses, ttl: settings.windowSecs * 1000 });

  return {
    hold(ip) {
      if (counts.size === 0) return undefined;
      const row = counts.get(addressOf(ip, deps.addressKey));
      if (row === undefined) return undefined;
      const ms = holdMs(row, settings.addressLimit, settings.windowSecs, settings.maxDelaySecs, Date.now());
      return ms > 0 ? sleep(ms) : undefined;
    },
    failed(ip) {
      const address = addressOf(ip, deps.addressKey);
      const now = Date.now();
      const row = counts.get(address, { updateAgeOnGet: false });
      if (row === undefined || row.windowStartedMs + settings.windowSecs * 1000 <= now) {
        counts.set(address, { failures: 1, windowStartedMs: now, lastFailedMs: now });
        return;
      }
      row.failures++;
      row.lastFailedMs = now;
    },
  };
}
