// SQL of custom API endpoints and their execution records.
import type postgres from 'postgres';
import type { Queryable } from '../db/client.js';
import { selectPage, type ListResult, type Page } from '../db/paging.js';

export interface EndpointRow {
  id: string;
  tenant_id: string | null;
  key: string;
  name: string;
  description: string | null;
  method: string;
  path: string;
  operation_kind: 'query' | 'mutation';
  graphql: string;
  auth_mode: 'caller_context' | 'service_context';
  service_entity_id: string | null;
  variables_mapping: Record<string, unknown>;
  request_schema: Record<string, unknown>;
  response_mapping: Record<string, unknown>;
  status: 'draft' | 'active' | 'disabled';
  created_by: string | null;
  updated_by: string | null;
  created_at: string | Date;
  updated_at: string | Date | null;
}

/** The stored fields of an endpoint, as the service validated them. */
export type EndpointFields = Omit<EndpointRow, 'id' | 'created_by' | 'updated_by' | 'created_at' | 'updated_at'>;

export interface ExecutionRow {
  id: string;
  endpoint_id: string | null;
  caller_entity_id: string | null;
  status: 'success' | 'error' | 'denied';
  request_summary: unknown;
  response_summary: unknown;
  error: string | null;
  created_at: string | Date;
}

export interface NewExecution {
  /** Time-ordered (UUIDv7 layout). */
  id: string;
  endpointId: string | null;
  callerEntityId: string | null;
  status: 'success' | 'error' | 'denied';
  /** JSON text (redacted and bounded by the execution log). */
  requestSummary: string;
  responseSummary: string;
  error: string | null;
  at: Date;
}

const columns = (sql: Queryable) => sql`
  e.id, e.tenant_id, e.key, e.name, e.description, e.method, e.path, e.operation_kind, e.graphql, e.auth_mode,
  e.service_entity_id, e.variables_mapping, e.request_schema, e.response_mapping, e.status, e.created_by, e.updated_by,
  e.created_at, e.updated_at`;

export async function findEndpoint(sql: Queryable, id: string, lock = false): Promise<EndpointRow | undefined> {
  const [row] = await sql<EndpointRow[]>`select ${columns(sql)} from api_endpoints e where e.id = ${id} ${lock ? sql`for update` : sql``}`;
  return row;
}

/** Every active endpoint: the routing table at start and after a lost LISTEN connection. */
export async function activeEndpoints(sql: Queryable): Promise<EndpointRow[]> {
  return sql<EndpointRow[]>`select ${columns(sql)} from api_endpoints e where e.status = 'active' order by e.id`;
}

export async function insertEndpoint(sql: Queryable, f: EndpointFields, actor: string): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    insert into api_endpoints as e (tenant_id, key, name, description, method, path, operation_kind, graphql, auth_mode,
      service_entity_id, variables_mapping, request_schema, response_mapping, status, created_by, updated_by)
    values (${f.tenant_id}, ${f.key}, ${f.name}, ${f.description}, ${f.method}, ${f.path}, ${f.operation_kind}, ${f.graphql},
      ${f.auth_mode}, ${f.service_entity_id}, ${sql.json(f.variables_mapping as never)}, ${sql.json(f.request_schema as never)},
      ${sql.json(f.response_mapping as never)}, ${f.status}, ${actor}, ${actor})
    returning ${columns(sql)}`;
  return row as EndpointRow;
}

/** Writes every field (the service merged the input into the stored row and validated the whole). */
export async function updateEndpoint(sql: Queryable, id: string, f: EndpointFields, actor: string): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    update api_endpoints as e set key = ${f.key}, name = ${f.name}, description = ${f.description}, method = ${f.method},
      path = ${f.path}, operation_kind = ${f.operation_kind}, graphql = ${f.graphql}, auth_mode = ${f.auth_mode},
      service_entity_id = ${f.service_entity_id}, variables_mapping = ${sql.json(f.variables_mapping as never)},
      request_schema = ${sql.json(f.request_schema as never)}, response_mapping = ${sql.json(f.response_mapping as never)},
      status = ${f.status}, updated_by = ${actor}, updated_at = now()
    where e.id = ${id}
    returning ${columns(sql)}`;
  return row as EndpointRow;
}

export async function setStatus(sql: Queryable, id: string, status: EndpointRow['status'], actor: string): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    update api_endpoints as e set status = ${status}, updated_by = ${actor}, updated_at = now()
    where e.id = ${id} returning ${columns(sql)}`;
  return row as EndpointRow;
}

export async function listEndpoints(
  sql: Queryable, filter: { tenantId: string | null; status: string | null }, page: Page,
): Promise<ListResult<EndpointRow>> {
  const conds: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (filter.tenantId) conds.push(sql`e.tenant_id = ${filter.tenantId}`);
  if (filter.status) conds.push(sql`e.status = ${filter.status}`);
  const where = conds.length ? conds.reduce((a, c) => sql`${a} and ${c}`) : sql`true`;
  return selectPage<EndpointRow>(sql, {
    columns: columns(sql),
    from: sql`from api_endpoints e where ${where}`,
    order: sql`e.tenant_id nulls first, e.key, e.id`,
  }, page);
}

export async function listExecutions(sql: Queryable, endpointId: string, page: Page): Promise<ListResult<ExecutionRow>> {
  return selectPage<ExecutionRow>(sql, {
    columns: sql`x.id, x.endpoint_id, x.caller_entity_id, x.status, x.request_summary, x.response_summary, x.error, x.created_at`,
    from: sql`from api_endpoint_executions x where x.endpoint_id = ${endpointId}`,
    order: sql`x.created_at desc, x.id desc`,
  }, page);
}

/**
 * A batch of execution records in one statement. The batch goes as one JSON text built around the
 * summaries, which are JSON text already (nothing is encoded twice), and PostgreSQL reads it once; this
 * costs about what COPY does here, and a refused row fails the statement (postgres.js loses COPY errors).
 */
export async function insertExecutions(sql: Queryable, batch: NewExecution[]): Promise<void> {
  if (batch.length === 0) return;
  let text = '[';
  for (let i = 0; i < batch.length; i++) {
    const x = batch[i] as NewExecution;
    text += `${i === 0 ? '' : ','}{"i":"${x.id}","e":${JSON.stringify(x.endpointId)},"c":${JSON.stringify(x.callerEntityId)},"s":"${x.status}",`
      + `"q":${x.requestSummary},"r":${x.responseSummary},"x":${JSON.stringify(x.error)},"t":"${x.at.toISOString()}"}`;
  }
  text += ']';
  // ::text first: a parameter typed json would be encoded as a JSON string once more.
  await sql`
    insert into api_endpoint_executions (id, endpoint_id, caller_entity_id, status, request_summary, response_summary, error, created_at)
    select i, e, c, s, q, r, x, t
    from json_to_recordset((${text}::text)::json) as b(i uuid, e uuid, c uuid, s text, q json, r json, x text, t timestamptz)`;
}

export interface ServiceEntityState {
  kind: string;
  status: string;
  deleted: boolean;
  tenant_id: string | null;
  tenant_status: string | null;
  tenant_deleted: boolean;
}

/** What decides whether a service_context endpoint may run as its entity (checked on every call). */
export async function serviceEntityState(sql: Queryable, id: string): Promise<ServiceEntityState | undefined> {
  const [row] = await sql<ServiceEntityState[]>`
    select e.kind, e.status, e.deleted_at is not null as deleted, e.tenant_id, t.status as tenant_status,
      coalesce(t.deleted_at is not null, false) as tenant_deleted
    from entities e left join tenants t on t.id = e.tenant_id where e.id = ${id}`;
  return row;
}

export async function entityExists(sql: Queryable, id: string): Promise<boolean> {
  const [row] = await sql`select 1 from entities where id = ${id}`;
  return row !== undefined;
}

export async function liveTenantExists(sql: Queryable, id: string): Promise<boolean> {
  const [row] = await sql`select 1 from tenants where id = ${id} and deleted_at is null`;
  return row !== undefined;
}

/** One trimmer of execution records across instances: the transaction holding this lock trims. */
const RETENTION_LOCK = 'custom-endpoints:execution-retention';

export async function tryRetentionLock(tx: Queryable): Promise<boolean> {
  const [row] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(hashtextextended(${RETENTION_LOCK}, 0)) as ok`;
  return row?.ok === true;
}

/**
 * Deletes at most `limit` execution records past the retention: per endpoint, those older than `days`
 * or beyond its newest `keep`, oldest first, and records of no endpoint (written by earlier versions for
 * calls that named none). Each endpoint's bound is one row (the older of its age cutoff and its keep-th
 * newest record), so the index on (endpoint_id, created_at, id) finds what is past it without reading
 * what is kept. Returns how many were deleted.
 */
export async function deleteExpiredExecutions(tx: Queryable, days: number, keep: number, limit: number): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    with cutoff as (select now() - make_interval(days => ${days}) as t),
    doomed as (
      (select x.id from api_endpoint_executions x where x.endpoint_id is null limit ${limit})
      union all
      (select d.id
      from api_endpoints e
      cross join cutoff c
      left join lateral (
        select k.created_at, k.id from api_endpoint_executions k
        where k.endpoint_id = e.id order by k.created_at desc, k.id desc offset ${keep - 1} limit 1
      ) kth on true
      cross join lateral (
        select case when kth.created_at >= c.t then kth.created_at else c.t end as t,
          case when kth.created_at >= c.t then kth.id else '00000000-0000-0000-0000-000000000000'::uuid end as id
      ) b
      cross join lateral (
        select y.id from api_endpoint_executions y
        where y.endpoint_id = e.id and (y.created_at, y.id) < (b.t, b.id)
        order by y.created_at, y.id limit ${limit}
      ) d
      limit ${limit})
    ),
    -- = any(array): the primary key finds each row (a join would be planned as a scan of the whole table).
    gone as (delete from api_endpoint_executions x where x.id = any(array(select id from doomed limit ${limit})) returning 1)
    select count(*)::int as n from gone`;
  return row?.n ?? 0;
}
