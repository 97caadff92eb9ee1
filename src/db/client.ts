// The postgres.js pool: one per process, sized from config; nothing else opens general-purpose connections.
import postgres from 'postgres';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';

export type Sql = postgres.Sql<Record<string, never>>;
export type TransactionSql = postgres.TransactionSql<Record<string, never>>;
/** Either the pool or an open transaction: query modules accept both so services choose the boundary. */
export type Queryable = Sql | TransactionSql;

export function createPool(url: string, config: Config['database'], log: Logger): Sql {
  return postgres(url, {
    max: config.poolMax,
    connect_timeout: config.connectTimeoutSecs,
    idle_timeout: config.idleTimeoutSecs || undefined,
    max_lifetime: config.maxLifetimeSecs || null,
    // Notices (e.g. "relation already exists, skipping") are noise at info level.
    onnotice: (notice) => log.debug('postgres notice', { message: notice.message }),
    connection: { application_name: 'svc', plan_cache_mode: 'force_custom_plan' },
  }) as unknown as Sql;
}
