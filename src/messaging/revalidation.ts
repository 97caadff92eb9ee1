// Subscriptions outlive the decisions that opened them: a revoked key or session, an expired token, a
// withdrawn grant, a deleted channel or a suspended workspace must end them. A periodic pass checks each
// open subscription again, one at a time (the caches make each check cheap), and ends the refused ones.
// Shared by the live WebSocket and CoAP observations; the MQTT broker checks a client's several filters
// in its own pass.
import { isTransient, toAppError, type AppError } from '../errors.js';
import type { Logger } from '../log.js';

export interface RevalidationOptions<T> {
  /** What a subscription is called in log lines ('live subscription', 'coap observation'). */
  what: string;
  intervalSecs: number;
  /** The open subscriptions now; the pass walks a copy. */
  open(): Iterable<T>;
  /** Still open (one may end while an earlier one is being checked). */
  isOpen(item: T): boolean;
  /** Why the subscriber may no longer receive, or null (refusalOf turns a thrown check into this). */
  refusal(item: T): Promise<AppError | null>;
  end(item: T, refusal: AppError): void;
  /** Fields that say which subscription ended, for the log line. */
  describe(item: T): Record<string, unknown>;
  log: Logger;
}

export interface Revalidation {
  stop(): void;
}

/** The check's outcome as a refusal: null when it passed; an unexpected failure is logged once here. */
export function refusalOf(check: Promise<unknown>, log: Logger, what: string): Promise<AppError | null> {
  return check.then(() => null, (err: unknown) => {
    const e = toAppError(err);
    if (e.kind === 'INTERNAL') log.error(`${what} check failed`, { err });
    return e;
  });
}

/** Every intervalSecs (0: never) a pass over the open subscriptions. */
export function startRevalidation<T>(o: RevalidationOptions<T>): Revalidation {
  // One pass at a time: a pass slower than the interval is not started twice.
  let running = false;
  async function run(): Promise<void> {
    if (running) return;
    running = true;
    let skipped: AppError | undefined;
    try {
      for (const item of [...o.open()]) {
        if (!o.isOpen(item)) continue;
        const refusal = await o.refusal(item);
        if (refusal === null || !o.isOpen(item)) continue;
        // The check itself failed (database away): the subscription stays until a pass can decide.
        if (isTransient(refusal)) {
          skipped = refusal;
          continue;
        }
        o.log.info(`${o.what} closed: no longer allowed`, { ...o.describe(item), reason: refusal.message });
        o.end(item, refusal);
      }
      // Once per pass, not per subscription: with the database away every one would say the same.
      if (skipped) o.log.warn(`${o.what}s not revalidated this pass`, { err: skipped.message });
    } finally {
      running = false;
    }
  }
  const timer = o.intervalSecs > 0 ? setInterval(() => void run(), o.intervalSecs * 1000) : undefined;
  timer?.unref();
  return { stop: () => clearInterval(timer) };
}
