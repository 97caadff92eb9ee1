// The PKCS#11 circuit breaker (SVC_PKI_PKCS11_CIRCUIT_*): after `threshold` consecutive failed operations it
// opens and refuses at once; after the reset time one trial operation goes through, closing it on success
// and reopening it on failure.
import { unavailable } from '../../errors.js';

export type BreakerState = 'closed' | 'open' | 'half_open';
/** Handed out per admitted operation; its outcome is recorded with it. */
export interface Ticket {
  trial: boolean;
}
/** 'neutral': the operation says nothing about the token (refused before reaching it, or the caller's mistake). */
export type Outcome = 'success' | 'failure' | 'neutral';

export interface Breaker {
  /** Throws UNAVAILABLE while open (or while a trial is out). */
  admit(): Ticket;
  record(ticket: Ticket, outcome: Outcome): void;
  describe(): { circuit: BreakerState; consecutive_failures: number; opened_at: string | null };
}

export function createBreaker(options: { threshold: number; resetMs: number; what: string; now?: () => number }): Breaker {
  const now = options.now ?? (() => performance.now());
  let state: BreakerState = 'closed';
  let failures = 0;
  let openedAt = 0;
  let openedWall: Date | null = null;
  let trialOut = false;

  const open = () => {
    state = 'open';
    openedAt = now();
    openedWall = new Date();
  };

  return {
    admit() {
      if (state === 'open') {
        const left = openedAt + options.resetMs - now();
        if (left > 0) {
          throw unavailable(`${options.what} is unavailable: circuit breaker open after ${failures} consecutive failures; next attempt in ${Math.ceil(left / 1000)} s`, Math.ceil(left / 1000));
        }
        state = 'half_open';
        trialOut = false;
      }
      if (state === 'half_open') {
        if (trialOut) throw unavailable(`${options.what} is unavailable: circuit breaker half-open, a trial operation is in progress`, 1);
        trialOut = true;
        return { trial: true };
      }
      return { trial: false };
    },
    record(ticket, outcome) {
      if (ticket.trial) {
        trialOut = false;
        if (outcome === 'success') {
          state = 'closed';
          failures = 0;
          openedWall = null;
        } else if (outcome === 'failure') {
          failures++;
          open();
        }
        return;
      }
      // Operations admitted before the breaker opened and answering after it say nothing new.
      if (state !== 'closed') return;
      if (outcome === 'success') failures = 0;
      else if (outcome === 'failure' && ++failures >= options.threshold) open();
    },
    describe() {
      return { circuit: state, consecutive_failures: failures, opened_at: openedWall?.toISOString() ?? null };
    },
  };
}
