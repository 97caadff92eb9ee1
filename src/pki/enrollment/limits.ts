// The enrollment listener's abuse limits: concurrent TLS connections (overall and per client address, IPv6
// reduced to its prefix) taken when the TCP connection arrives and given back when it closes, and the
// per-entity and per-tenant enrollment windows counted once a caller is authenticated. In-process: each
// instance limits its own share, like the HTTP rate limiter.
import { rateLimited } from '../../errors.js';

export interface ConnectionCaps {
  /** Takes a slot for a new connection from `addressKey`; false when a cap is reached (close it at once). */
  admit(addressKey: string): boolean;
  release(addressKey: string): void;
  readonly open: number;
}

export function createConnectionCaps(max: number, maxPerAddress: number): ConnectionCaps {
  const perAddress = new Map<string, number>();
  let open = 0;
  return {
    admit(key) {
      const mine = perAddress.get(key) ?? 0;
      if (open >= max || mine >= maxPerAddress) return false;
      open++;
      perAddress.set(key, mine + 1);
      return true;
    },
    release(key) {
      const mine = perAddress.get(key) ?? 0;
      if (mine <= 1) perAddress.delete(key);
      else perAddress.set(key, mine - 1);
      open = Math.max(0, open - 1);
    },
    get open() {
      return open;
    },
  };
}

interface Window {
  count: number;
  resetAt: number;
}

const MAX_KEYS = 200_000;

/** Fixed windows keyed by subject: hit() throws RATE_LIMITED (429 + Retry-After) beyond `max` per window. */
export function createWindows(name: string, max: number, windowSecs: number) {
  const windows = new Map<string, Window>();
  let lastSweep = 0;

  function sweep(now: number): void {
    if (windows.size < MAX_KEYS && now - lastSweep < 60_000) return;
    lastSweep = now;
    for (const [k, w] of windows) if (w.resetAt <= now) windows.delete(k);
    // Still full of open windows: drop the oldest rather than grow without bound.
    let excess = windows.size - MAX_KEYS / 2;
    for (const k of windows.keys()) {
      if (excess-- <= 0) break;
      windows.delete(k);
    }
  }

  return {
    hit(key: string, now = Date.now()): void {
      sweep(now);
      let w = windows.get(key);
      if (!w || w.resetAt <= now) {
        w = { count: 0, resetAt: now + windowSecs * 1000 };
        windows.set(key, w);
      }
      w.count++;
      if (w.count > max) {
        const wait = Math.max(1, Math.ceil((w.resetAt - now) / 1000));
        throw rateLimited(wait, `rate limit exceeded: at most ${max} enrollments per ${windowSecs} s per ${name}`);
      }
    },
  };
}

export interface EnrollmentRates {
  /** Counts one enrollment of the entity (and its tenant); throws RATE_LIMITED when either window is full. */
  hit(entityId: string, tenantId: string | null): void;
}

export function createEnrollmentRates(settings: {
  enabled: boolean; entityRateLimit: number; entityRateWindowSecs: number; tenantRateLimit: number; tenantRateWindowSecs: number;
}): EnrollmentRates {
  const entities = createWindows('entity', settings.entityRateLimit, settings.entityRateWindowSecs);
  const tenants = createWindows('tenant', settings.tenantRateLimit, settings.tenantRateWindowSecs);
  return {
    hit(entityId, tenantId) {
      if (!settings.enabled) return;
      entities.hit(entityId);
      tenants.hit(tenantId ?? 'platform');
    },
  };
}
