// List pages: the total and the page come from one statement, so they always describe the same snapshot.
import type postgres from 'postgres';
import { invalidInput } from '../errors.js';
import type { Queryable } from './client.js';

export interface Page {
  limit: number;
  offset: number;
}

export interface ListResult<T> {
  total: number;
  items: T[];
}

/**
 * Page bounds as the API promises them: limit clamped to 1..max (default when absent); a negative limit
 * or offset is a mistake in the request, refused with its name (as the message reader does), never
 * quietly read as another page.
 */
export function pageOf(args: { limit?: number | null; offset?: number | null }, bounds: { defaultLimit: number; maxLimit: number }): Page {
  for (const field of ['limit', 'offset'] as const) {
    const value = args[field];
    if (value !== undefined && value !== null && !(value >= 0)) throw invalidInput(`${field} must not be negative`);
  }
  const limit = args.limit ?? bounds.defaultLimit;
  return {
    limit: Math.min(bounds.maxLimit, Math.max(1, Math.trunc(limit))),
    offset: Math.trunc(args.offset ?? 0),
  };
}

/**
 * Whether the grants restrict a listing further than its tenant filter does: not when the one tenant
 * asked for is wholly readable (its rows are then all readable, and the extra condition only costs the
 * planner and every row a check).
 */
export function restrictsBeyondTenant(readableTenantIds: string[] | null, tenantId: string | null | undefined): readableTenantIds is string[] {
  if (readableTenantIds === null) return false;
  return !(typeof tenantId === 'string' && readableTenantIds.includes(tenantId));
}

/**
 * The connections a page is read through. A plain listing (a tenant or everything, equality filters, an
 * order: the admin UI's default) gets the same plan whatever the values, so it runs on `generic`
 * (createGenericPlanPool), planned once per connection instead of on every call (planning was about 60%
 * of a plain page's PostgreSQL CPU). A search (free text, JSON containment, a time range) or a
 * readable-tenant array stays on the shared pool's custom plans: a generic plan costs `= any($n)` at a
 * default size and scanned every tenant where the custom plan took one key.
 */
export function listingSql(shared: Queryable, generic: Queryable | undefined, plain: boolean): Queryable {
  return plain && generic !== undefined ? generic : shared;
}

type Fragment = postgres.PendingQuery<postgres.Row[]> | postgres.Fragment;

/**
 * `from` is the `from ... where ...` part (filters, grants already applied), `columns` the select list
 * of one item, `order` a total order (end it with the id). Items come back as JSON objects keyed by
 * column name (timestamps as ISO strings).
 */
export async function selectPage<T>(
  sql: Queryable,
  parts: { columns: Fragment; from: Fragment; order: Fragment; /** a cheaper exact count, when one is kept */ total?: Fragment },
  page: Page,
): Promise<ListResult<T>> {
  const [row] = await sql<[{ total: number; items: T[] }]>`
    select
      (${parts.total ?? sql`select count(*)::int ${parts.from}`}) as total,
      coalesce((
        select json_agg(p) from (
          select ${parts.columns} ${parts.from} order by ${parts.order} limit ${page.limit} offset ${page.offset}
        ) p
      ), '[]'::json) as items`;
  return row;
}

/**
 * The same page as selectPage, as plain rows: PostgreSQL sends the page's columns as they are (no JSON
 * built per row and parsed again), with the total in a column of every row. The lateral join keeps one
 * row (all page columns null) when the page is empty, so the total still comes back in the same round
 * trip. Rows keep postgres.js types (timestamps as Date, json parsed); `key` is a page column that is
 * never null (the empty page is told by it), `total` must not be a page column.
 */
export async function selectRows<T extends Record<string, unknown>>(
  sql: Queryable,
  parts: { columns: Fragment; from: Fragment; order: Fragment; total?: Fragment; key?: string },
  page: Page,
): Promise<ListResult<T>> {
  const rows = await sql<(T & { total: number })[]>`
    select page_total.total, page_rows.* from (
      select (${parts.total ?? sql`select count(*)::int ${parts.from}`}) as total
    ) page_total left join lateral (
      select ${parts.columns} ${parts.from} order by ${parts.order} limit ${page.limit} offset ${page.offset}
    ) page_rows on true`;
  const first = rows[0];
  if (!first) return { total: 0, items: [] };
  return { total: first.total, items: first[parts.key ?? 'id'] === null ? [] : rows };
}
