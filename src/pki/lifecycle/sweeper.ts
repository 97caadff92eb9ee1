// The lifecycle sweeper (SVC_PKI_LIFECYCLE_*): every interval, one instance at a time (advisory lock), at
// most the batch size per tick, writes certificate.expiring for leaves within SVC_PKI_EXPIRY_WARNING_SECS
// of expiry and certificate.authority_expiring for authorities within SVC_PKI_AUTHORITY_WARNING_SECS.
// Each notice is written once per certificate: its row and its outbox record commit together.
import type { Sql } from '../../db/client.js';
import type { Logger } from '../../log.js';
import { noticeExpiringAuthorities, noticeExpiringCertificates, trySweeperLock } from './queries.js';

export interface LifecycleSettings {
  intervalSecs: number;
  batchSize: number;
  expiryWarningSecs: number;
  authorityWarningSecs: number;
}

export interface SweepResult {
  swept: boolean;
  authorities: number;
  certificates: number;
}

export function createLifecycleSweeper(deps: { sql: Sql; log: Logger; settings: LifecycleSettings }) {
  const { sql, log, settings } = deps;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;

  /** One tick: false `swept` when another instance holds the sweeper lock. */
  async function sweep(): Promise<SweepResult> {
    return sql.begin(async (tx) => {
      if (!(await trySweeperLock(tx))) return { swept: false, authorities: 0, certificates: 0 };
      const authorities = await noticeExpiringAuthorities(tx, settings.authorityWarningSecs, settings.batchSize);
      const certificates = await noticeExpiringCertificates(tx, settings.expiryWarningSecs, settings.batchSize - authorities);
      return { swept: true, authorities, certificates };
    }) as Promise<SweepResult>;
  }

  function tick(): void {
    if (running) return;
    running = sweep()
      .then((r) => {
        if (r.authorities || r.certificates) log.info('expiry notices written', { authorities: r.authorities, certificates: r.certificates });
      })
      .catch((err: unknown) => log.warn('lifecycle sweep failed; retried next interval', { err: String(err) }))
      .finally(() => { running = undefined; });
  }

  return {
    sweep,
    start(): void {
      tick();
      timer = setInterval(tick, settings.intervalSecs * 1000);
      timer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}

export type LifecycleSweeper = ReturnType<typeof createLifecycleSweeper>;
