// Failed-credential throttling shared by every credential check (GraphQL/REST login, gRPC
// AuthenticateCredential): counters in PostgreSQL, so the policy holds across instances.
//
// Policy (README "Login"): failures are counted per (identity, client address), per identity from every
// address, and per address for every identity, each in a window of SVC_LOGIN_FAILURE_WINDOW_SECS that
// opens at its first failure. Past SVC_LOGIN_FAILURE_LIMIT failures of one identity from one address,
// and past SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT from all addresses together, each further attempt waits
// a delay that doubles with every failure (1 s, 2 s, 4 s, ... up to the window's end): an attacker slows
// down at once while a user elsewhere who types the right password is held back seconds, not locked out.
// An address past SVC_LOGIN_FAILURE_IP_LIMIT failures (set for a NAT of many users) is refused until its
// window ends. A refusal is RATE_LIMITED 'too many failed login attempts' with retryAfterSeconds (HTTP 429
// with Retry-After); it comes before the secret is looked at, so it says nothing about the secret.
import type { Sql } from '../db/client.js';
import { AppError } from '../errors.js';
import * as q from './queries.js';

export interface LoginThrottleSettings {
  /** Failures of one identity from one address before delays start. */
  pairLimit: number;
  /** Failures of one identity from every address before delays start for all. */
  identityLimit: number;
  /** Failures from one address (every identity) per window; past it the address waits for the window's end. */
  addressLimit: number;
  windowSecs: number;
}

export interface LoginAttempt {
  /**
   * What is being guessed: the resolved entity id when the identifier names one (so name, email, alias
   * and id share one counter), else the identifier as given, lowercased, with its kind.
   */
  identity: string;
  /**
   * The client address (already resolved through trusted proxies). null: no client address applies (a
   * protocol adapter asking for a whole fleet): only the identity's own counter is kept, since counting
   * the adapter's address would soon hold back every device behind it.
   */
  ip: string | null;
}

/** An admitted attempt, already counted as a failure on every key until told otherwise. */
export interface Admission {
  /** The secret was wrong (or the identifier unknown): the count stands. */
  failed(): Promise<void>;
  /** The secret was right: this identity's counters start afresh and the address's count is taken back. */
  succeeded(): Promise<void>;
}

export interface LoginThrottle {
  /** Refuses with RATE_LIMITED (retryAfterSeconds) while the attempt is held back; call before checking the secret. */
  admit(attempt: LoginAttempt): Promise<Admission>;
}

export const THROTTLED_MESSAGE = 'too many failed login attempts';

type Mode = 'delay' | 'ceiling';

/**
 * When a key lets the next attempt through (ms since the epoch), or null when it holds nothing back.
 * Pure, so the policy is testable without a clock: `delay` keys wait 2^(failures - limit) seconds after
 * the last failure, `ceiling` keys until the window ends; neither waits past the window's end.
 */
export function releaseAt(row: { failures: number; windowStartedMs: number; lastFailedMs: number }, limit: number, mode: Mode, windowSecs: number): number | null {
  if (row.failures < limit) return null;
  const windowEnd = row.windowStartedMs + windowSecs * 1000;
  if (mode === 'ceiling') return windowEnd;
  const over = Math.min(row.failures - limit, 40);
  return Math.min(row.lastFailedMs + 2 ** over * 1000, windowEnd);
}

export function createLoginThrottle(deps: { sql: Sql; settings: LoginThrottleSettings; addressKey: (ip: string) => string }): LoginThrottle {
  const { sql, settings } = deps;

  return {
    async admit(attempt) {
      const identityKey = { key: `id:${attempt.identity}`, limit: settings.identityLimit, mode: 'delay' as Mode };
      const address = attempt.ip === null ? null : deps.addressKey(attempt.ip);
      const keys: { key: string; limit: number; mode: Mode }[] = address === null ? [identityKey] : [
        { key: `pair:${attempt.identity}\n${address}`, limit: settings.pairLimit, mode: 'delay' },
        identityKey,
        { key: `ip:${address}`, limit: settings.addressLimit, mode: 'ceiling' },
      ];
      const names = keys.map((k) => k.key);
      // The attempt is counted as it is admitted, under the counters' row locks: concurrent guesses queue
      // here and each sees the ones before it, so a burst sent the moment a delay ends gets one try, not
      // a hundred. A right secret takes the count back (succeeded).
      const wait = await sql.begin(async (tx) => {
        const rows = await q.lockLoginFailures(tx, names, settings.windowSecs);
        let ms = 0;
        for (const row of rows) {
          const policy = keys.find((k) => k.key === row.key);
          const until = policy ? releaseAt(row, policy.limit, policy.mode, settings.windowSecs) : null;
          if (until !== null && until > row.nowMs) ms = Math.max(ms, until - row.nowMs);
        }
        if (ms === 0) await q.countLoginAttempt(tx, names, settings.windowSecs);
        return ms;
      });
      if (wait > 0) throw new AppError('RATE_LIMITED', THROTTLED_MESSAGE, { retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)) });
      let settled = false;
      return {
        failed: async () => {
          settled = true;
        },
        succeeded: async () => {
          if (settled) return;
          settled = true;
          // Identity keys start afresh; the address's count is only taken back.
          const cleared = keys.filter((k) => k.mode === 'delay').map((k) => k.key);
          await q.forgiveLoginAttempt(sql, cleared, names.filter((n) => !cleared.includes(n)));
        },
      };
    },
  };
}
