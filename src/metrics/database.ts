// Database connections and the LISTEN connection. postgres.js shows no pool counts of its own, so the
// connections are read from pg_stat_activity at scrape time, by the application_name each pool sets
// (svc, svc-authz, svc-writer, ...): PostgreSQL's view, which counts every instance sharing the database.
import type { Registry } from 'prom-client';
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { Logger } from '../log.js';
import { one, scrapedCounter, scrapedGauge, type Sample } from './scraped.js';

/** A scrape must not hang on a busy database: past this, connection series are left out of that scrape. */
const QUERY_TIMEOUT_MS = 2000;

export interface PoolLimit {
  /** The pool's application_name. */
  pool: string;
  max: number;
}

export function databaseMetrics(registry: Registry, deps: { sql: Sql; hub: NotifyHub; pools: readonly PoolLimit[]; log: Logger }): void {
  const { sql, hub, log } = deps;
  // Both connection gauges come from one query per scrape (the registry reads every metric at once).
  let reading: Promise<{ pool: string; state: string; n: number; max: number }[] | null> | undefined;
  function activity() {
    return (reading ??= readActivity().finally(() => {
      setTimeout(() => {
        reading = undefined;
      }, 1000).unref();
    }));
  }

  async function readActivity() {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('pg_stat_activity did not answer in time')), QUERY_TIMEOUT_MS);
    });
    try {
      return await Promise.race([sql<{ pool: string; state: string; n: number; max: number }[]>`
        select application_name as pool, coalesce(state, 'unknown') as state, count(*)::int as n,
               current_setting('max_connections')::int as max
        from pg_stat_activity
        where datname = current_database() and application_name like 'svc%'
        group by 1, 2`, timeout]);
    } catch (err) {
      log.debug('metrics: database connections not read', { err: String(err) });
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  async function connections(): Promise<Sample[]> {
    const rows = await activity();
    return rows ? rows.map((r) => ({ labels: { pool: r.pool, state: r.state }, value: r.n })) : [];
  }

  async function serverMax(): Promise<Sample[]> {
    const rows = await activity();
    return rows && rows.length > 0 ? one((rows[0] as { max: number }).max) : [];
  }

  scrapedGauge(registry, 'svc_db_connections', 'Connections to this database as PostgreSQL reports them (all instances), by pool (application_name) and state (active, idle, idle in transaction)', connections);
  scrapedGauge(registry, 'svc_db_pool_max_connections', 'Most connections this instance opens per pool (its settings)', () =>
    deps.pools.map((p) => ({ labels: { pool: p.pool }, value: p.max })));
  scrapedGauge(registry, 'svc_db_server_max_connections', 'PostgreSQL max_connections (read with the connection counts)', serverMax);
  scrapedGauge(registry, 'svc_notify_connected', '1 while the LISTEN connection (cache invalidation across instances) is up, else 0', () => one(hub.connected ? 1 : 0));
  scrapedCounter(registry, 'svc_notify_reconnects_total', 'Times the LISTEN connection was re-established (each one clears the caches it feeds)', () => one(hub.reconnects));
}
