// The postgres.js pool: one per process, sized from config; nothing else opens general-purpose connections.
// Domains whose statements want generic plans open small pools of their own (createGenericPlanPool).
import postgres from 'postgres';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';

export type Sql = postgres.Sql<Record<string, never>>;
export type TransactionSql = postgres.TransactionSql<Record<string, never>>;
/** Either the pool or an open transaction: query modules accept both so services choose the boundary. */
export type Queryable = Sql | TransactionSql;

/**
 * Seconds before a closed connection reconnects, by its pool's count of failed attempts since the last
 * success (postgres.js `backoff`). The library's default grows to 20 s (3^n / 100) with a count shared by
 * the whole pool, and a query handed to a closed connection waits out its delay while the other
 * connections sit idle: after a burst of failures (a restart, terminated backends) one EST request waited
 * more than 10 s. Capped at 1 s, a database that is down still sees at most one attempt per connection per
 * second. Every connection the service opens uses it.
 */
export const reconnectDelaySecs = (failures: number): number => (0.5 + Math.random() / 2) * Math.min(3 ** failures / 100, 1);

export function createPool(url: string, config: Config['database'], log: Logger): Sql {
  return postgres(url, {
    max: config.poolMax,
    backoff: reconnectDelaySecs,
    connect_timeout: config.connectTimeoutSecs,
    idle_timeout: config.idleTimeoutSecs || undefined,
    max_lifetime: config.maxLifetimeSecs || null,
    // Notices (e.g. "relation already exists, skipping") are noise at info level.
    onnotice: (notice) => log.debug('postgres notice', { message: notice.message }),
    connection: { application_name: 'svc', plan_cache_mode: 'force_custom_plan' },
  }) as unknown as Sql;
}

/** Connections of one pool: open (including those being opened) and idle among them. */
export interface PoolCounts {
  size: number;
  idle: number;
  /** Queries waiting for a connection. */
  queued: number;
}

interface RawCounts { connecting: number; reserved: number; open: number; busy: number; full: number; queued: number }

/**
 * The pool's own connection counts. postgres.js 3.4.9 has no public API for them; the patch
 * (patches/postgres+3.4.9.patch) adds `connectionCounts()`. null on an unpatched install: unknown, not 0.
 */
export function poolCounts(sql: Sql): PoolCounts | null {
  const read = (sql as unknown as { connectionCounts?: () => RawCounts }).connectionCounts;
  if (typeof read !== 'function') return null;
  const c = read();
  // reserved: held by a transaction or sql.reserve(); busy/full: running queries (full: pipeline full).
  return { size: c.connecting + c.reserved + c.open + c.busy + c.full, idle: c.open, queued: c.queued };
}

export interface GenericPlanPoolOptions {
  /** application_name, so the connections show in pg_stat_activity as their domain's. */
  name: string;
  max: number;
  connectTimeoutSecs: number;
  /** Bounds each statement (0: no bound; absent: the server's setting). */
  statementTimeoutMs?: number;
  /** Off when no statement returns arrays or custom types (saves the type lookup at connect). */
  fetchTypes?: boolean;
}

/**
 * Connections of a domain's own for statements whose best plan does not depend on the values bound (a
 * lookup by key, a page over an index), with generic plans forced: each statement is planned once per
 * connection instead of on every call. The shared pool forces custom plans, which its list queries need
 * (a generic plan costs LIMIT $n as a tenth of the table), and which cost a large lookup more to plan
 * than to run.
 */
export function createGenericPlanPool(url: string, options: GenericPlanPoolOptions): Sql {
  return postgres(url, {
    max: options.max, fetch_types: options.fetchTypes ?? true, idle_timeout: 60, connect_timeout: options.connectTimeoutSecs,
    backoff: reconnectDelaySecs, onnotice: () => undefined,
    connection: {
      application_name: options.name, plan_cache_mode: 'force_generic_plan',
      ...(options.statementTimeoutMs !== undefined ? { statement_timeout: options.statementTimeoutMs } : {}),
    },
  }) as unknown as Sql;
}
