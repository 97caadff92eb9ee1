// Failed-credential throttling shared by every check of a password or identified key (GraphQL/REST login,
// EST Basic, gRPC AuthenticateCredential): counters in PostgreSQL, so the policy holds across instances.
//
// Policy (docs/authentication.md "Failed attempts"): failures are counted per (identity, client address),
// per identity from every address, and per address for every identity, each in a window of
// SVC_LOGIN_FAILURE_WINDOW_SECS that opens at its first failure. Only the first can refuse: past
// SVC_LOGIN_FAILURE_LIMIT failures of one identity from one address, that pair is refused for a delay that
// doubles with every failure (1 s, 2 s, 4 s, ... up to the window's end). The identity past
// SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT and the address past SVC_LOGIN_FAILURE_IP_LIMIT only hold attempts
// back (the same doubling delay, at most SVC_LOGIN_FAILURE_MAX_DELAY_SECS) and then check them: failures
// from one address never refuse the right secret from another, nor, past the address's ceiling, from
// that address for another identity. A refusal is RATE_LIMITED 'too many failed login attempts' with
// retryAfterSeconds (HTTP 429 with Retry-After); it comes before the secret is looked at.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../db/client.js';
import { AppError } from '../errors.js';
import * as q from './queries.js';

export interface LoginThrottleSettings {
  /** Failures of one identity from one address before that pair is refused (with doubling delays). */
  pairLimit: number;
  /** Failures of one identity from every address before its attempts are held back, from everywhere. */
  identityLimit: number;
  /** Failures from one address (every identity) before its attempts are held back. */
  addressLimit: number;
  windowSecs: number;
  /** The longest an attempt is held back (identity or address past its limit); 0: never held. */
  maxDelaySecs: number;
}

export interface LoginAttempt {
  /**
   * What is being guessed: the resolved entity id when the identifier names one (so name, email, alias
   * and id share one counter), else the identifier as given, lowercased, with its kind.
   */
  identity: string;
  /**
   * The client address (already resolved through trusted proxies); null or empty when none is known
   * (then counted as the address 'unknown').
   */
  ip: string | null;
  /**
   * The address is an authenticated adapter's that relays many clients' credentials (gRPC
   * AuthenticateCredential): its pair and the identity are counted, not an address-wide total, which
   * would hold back every client behind the adapter for the failures of a few.
   */
  relayed?: boolean;
}

/** An admitted attempt, already counted as a failure on every key until told otherwise. */
export interface Admission {
  /** The secret was wrong (or the identifier unknown): the count stands. */
  failed(): Promise<void>;
  /** The secret was right: this identity's counters start afresh and the address's count is taken back. */
  succeeded(): Promise<void>;
  /**
   * The check never reached a verdict (the database cut it, the caller went away): it guessed nothing, so
   * its count is taken back from every key. Never rejects: with the database still down the count stands,
   * which errs on the guesser's side of the policy.
   */
  abandoned(): Promise<void>;
  /** How long the attempt was held back before it was let through (ms). */
  readonly heldMs: number;
}

export interface LoginThrottle {
  /**
   * Refuses with RATE_LIMITED (retryAfterSeconds) while the (identity, address) pair is held off; else
   * counts the attempt, waits out any hold, and admits it. Call before checking the secret.
   */
  admit(attempt: LoginAttempt): Promise<Admission>;
}

export const THROTTLED_MESSAGE = 'too many failed login attempts';

/** What a key past its limit does: refuse the attempt (the pair) or hold it back, then check it. */
export type Mode = 'refuse' | 'hold';

export interface FailureCount {
  failures: number;
  windowStartedMs: number;
  lastFailedMs: number;
}

/**
 * When a key lets the next attempt through (ms since the epoch), or null when it holds nothing back.
 * Pure, so the policy is testable without a clock: past the limit, 2^(failures - limit) seconds after the
 * last failure, never past the window's end.
 */
export function releaseAt(row: FailureCount, limit: number, windowSecs: number): number | null {
  if (row.failures < limit) return null;
  const windowEnd = row.windowStartedMs + windowSecs * 1000;
  const over = Math.min(row.failures - limit, 40);
  return Math.min(row.lastFailedMs + 2 ** over * 1000, windowEnd);
}

/** How long a held key keeps an attempt waiting (ms): its release, at most maxDelaySecs. */
export function holdMs(row: FailureCount, limit: number, windowSecs: number, maxDelaySecs: number, nowMs: number): number {
  const until = releaseAt(row, limit, windowSecs);
  return until === null || until <= nowMs ? 0 : Math.min(until - nowMs, maxDelaySecs * 1000);
}

/** The address a throttle counts: the limiter's key (IPv6 per prefix), 'unknown' when none is known. */
export function addressOf(ip: string | null, addressKey: (ip: string) => string): string {
  return (ip ? addressKey(ip) : '') || 'unknown';
}

export function createLoginThrottle(deps: { sql: Sql; settings: LoginThrottleSettings; addressKey: (ip: string) => string }): LoginThrottle {
  const { sql, settings } = deps;

  return {
    async admit(attempt) {
      const address = addressOf(attempt.ip, deps.addressKey);
      const pair = `pair:${attempt.identity}\n${address}`;
      const identity = `id:${attempt.identity}`;
      const keys: { key: string; limit: number; mode: Mode }[] = [
        { key: pair, limit: settings.pairLimit, mode: 'refuse' },
        { key: identity, limit: settings.identityLimit, mode: 'hold' },
      ];
      if (!attempt.relayed) keys.push({ key: `ip:${address}`, limit: settings.addressLimit, mode: 'hold' });
      const names = keys.map((k) => k.key);
      // The attempt is counted as it is admitted, under the counters' row locks: concurrent guesses queue
      // here and each sees the ones before it, so a burst sent the moment a delay ends gets one try, not
      // a hundred. A right secret takes the count back (succeeded). Holds are waited out after the
      // commit, with no lock held.
      const verdict = await sql.begin(async (tx) => {
        const rows = await q.lockLoginFailures(tx, names, settings.windowSecs);
        let refuse = 0;
        let hold = 0;
        for (const row of rows) {
          const policy = keys.find((k) => k.key === row.key);
          if (!policy) continue;
          if (policy.mode === 'refuse') {
            const until = releaseAt(row, policy.limit, settings.windowSecs);
            if (until !== null && until > row.nowMs) refuse = Math.max(refuse, until - row.nowMs);
          } else {
            hold = Math.max(hold, holdMs(row, policy.limit, settings.windowSecs, settings.maxDelaySecs, row.nowMs));
          }
        }
        if (refuse === 0) await q.countLoginAttempt(tx, rows.map((r) => r.key), settings.windowSecs);
        return { refuse, hold };
      });
      if (verdict.refuse > 0) throw new AppError('RATE_LIMITED', THROTTLED_MESSAGE, { retryAfterSeconds: Math.max(1, Math.ceil(verdict.refuse / 1000)) });
      if (verdict.hold > 0) await sleep(verdict.hold);
      let settled = false;
      return {
        heldMs: verdict.hold,
        failed: async () => {
          settled = true;
        },
        succeeded: async () => {
          if (settled) return;
          settled = true;
          // The identity's keys start afresh; the address's count is only taken back.
          await q.forgiveLoginAttempt(sql, [pair, identity], names.filter((n) => n !== pair && n !== identity));
        },
        abandoned: async () => {
          if (settled) return;
          settled = true;
          await q.forgiveLoginAttempt(sql, [], names).catch(() => undefined);
        },
      };
    },
  };
}
