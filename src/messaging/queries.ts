// SQL of the messaging domain: batch inserts (group commit), reader pages and totals, partition upkeep.
import type { Queryable } from '../db/client.js';
import type { Protocol } from './types.js';

/**
 * One batch as PostgreSQL array literals (built by batch-literals.ts): the per-source columns (workspace,
 * channel, publisher, protocol, subtopic) are indexed by each row's source number, so a 100-record
 * publish, or many publishes of one device to one channel, send and parse their ids once.
 */
export interface BatchLiterals {
  /** Per source: workspace, channel, publisher, protocol, subtopic. */
  workspaces: string;
  channels: string;
  publishers: string;
  protocols: string;
  subtopics: string;
  /** Per row: the 1-based source number, then the record's own fields. */
  publish: string;
  names: string;
  units: string;
  times: string;
  values: string;
  /** Only in batches where some record carries a string, boolean, data value, sum or update time. */
  extra: { strings: string; bools: string; data: string; sums: string; updateTimes: string } | null;
  /** Per channel of the batch: its id and how many rows it adds (message_counts). */
  counted: { channels: string; messages: string };
}

// The batch statement's parameters, in order: per source ($1-$5), per row ($6-$10), per channel of the
// batch ($11-$12), then the rarer columns ($13-$17) in the statement that carries them.
const SOURCE_COLUMNS = `($1::uuid[])[m.p], ($2::uuid[])[m.p], ($3::uuid[])[m.p], ($4::text[])[m.p], ($5::text[])[m.p]`;
const ROW_ARRAYS = `unnest($6::int[]) as p, unnest($7::text[]) as name, unnest($8::text[]) as unit,
       unnest($9::float8[]) as time, unnest($10::float8[]) as value`;
/**
 * The batch's rows per channel added to today's counters (UTC day of now(), the rows' received_at), in
 * channel order so that two writers upserting the same channels lock them in the same order.
 */
const ADD_COUNTS = `insert into message_counts (channel_id, day, messages)
select c.channel_id, (now() at time zone 'UTC')::date, c.messages
from unnest($11::uuid[], $12::int8[]) as c(channel_id, messages)
order by 1
on conflict (channel_id, day) do update set messages = message_counts.messages + excluded.messages`;

const INSERT_PLAIN = `with stored as (
  insert into messages (workspace_id, channel_id, publisher_id, protocol, subtopic, name, unit, time, value)
  select ${SOURCE_COLUMNS}, m.name, m.unit, m.time, m.value
  from (select ${ROW_ARRAYS}) m)
${ADD_COUNTS}`;

const INSERT_EXTRA = `with stored as (
  insert into messages (workspace_id, channel_id, publisher_id, protocol, subtopic, name, unit, time, value,
                        string_value, bool_value, data_value, sum, update_time)
  select ${SOURCE_COLUMNS}, m.name, m.unit, m.time, m.value, m.sv, m.bv, m.dv, m.sum, m.ut
  from (select ${ROW_ARRAYS},
               unnest($13::text[]) as sv, unnest($14::bool[]) as bv, unnest($15::text[]) as dv,
               unnest($16::float8[]) as sum, unnest($17::float8[]) as ut) m)
${ADD_COUNTS}`;

/**
 * One statement per batch: the rows, and their counters in a CTE of the same statement, so both commit
 * or neither does. The statement text is fixed (one per shape, with or without the rarer columns), so
 * each writer connection prepares it once; it is a constant rather than a template of fragments because
 * postgres.js would otherwise rebuild the text from its fragments for every batch (measured: about 6-17%
 * of the writer process's CPU per 64-row batch, bench/results/HISTORY.md 2026-11-28). The parameters are
 * array literals (batch-literals.ts); each cast gives its parameter's type, as the template's casts did.
 * The arrays are unnested in the select list (ProjectSet, in step) rather than in FROM, which would first
 * copy every row into a tuplestore.
 */
export function insertBatch(sql: Queryable, b: BatchLiterals) {
  const e = b.extra;
  const common = [b.workspaces, b.channels, b.publishers, b.protocols, b.subtopics, b.publish, b.names, b.units, b.times, b.values,
    b.counted.channels, b.counted.messages];
  return e === null
    ? sql.unsafe(INSERT_PLAIN, common, { prepare: true })
    : sql.unsafe(INSERT_EXTRA, [...common, e.strings, e.bools, e.data, e.sums, e.updateTimes], { prepare: true });
}

export interface MessageRow {
  channel_id: string;
  publisher_id: string;
  protocol: string;
  subtopic: string | null;
  name: string;
  unit: string | null;
  time: number;
  value: number | null;
  string_value: string | null;
  bool_value: boolean | null;
  data_value: string | null;
  sum: number | null;
  update_time: number | null;
}

export type ValueComparator = 'eq' | 'lt' | 'le' | 'gt' | 'ge';

export interface ReadFilter {
  channelId: string;
  name?: string;
  /** Exact subtopic ('room.1/temp'); messages without one are never matched. */
  subtopic?: string;
  publisherId?: string;
  protocol?: Protocol;
  /** The numeric value compared with v (messages without a numeric value never match). */
  value?: { comparator: ValueComparator; v: number };
  boolValue?: boolean;
  stringValue?: string;
  dataValue?: string;
  /** Inclusive bounds on the message time (seconds). */
  from?: number;
  to?: number;
  offset: number;
  limit: number;
}

/** Fixed statement text per comparator: the client picks one of these, never writes an operator. */
function valueCondition(sql: Queryable, value: NonNullable<ReadFilter['value']>) {
  const v = value.v;
  switch (value.comparator) {
    case 'eq': return sql`and value = ${v}`;
    case 'lt': return sql`and value < ${v}`;
    case 'le': return sql`and value <= ${v}`;
    case 'gt': return sql`and value > ${v}`;
    case 'ge': return sql`and value >= ${v}`;
  }
}

function hasFilter(f: ReadFilter): boolean {
  return f.name !== undefined || f.subtopic !== undefined || f.publisherId !== undefined || f.protocol !== undefined
    || f.value !== undefined || f.boolValue !== undefined || f.stringValue !== undefined || f.dataValue !== undefined
    || f.from !== undefined || f.to !== undefined;
}

function conditions(sql: Queryable, f: ReadFilter) {
  const name = f.name === undefined ? sql`` : sql`and name = ${f.name}`;
  const subtopic = f.subtopic === undefined ? sql`` : sql`and subtopic = ${f.subtopic}`;
  const publisher = f.publisherId === undefined ? sql`` : sql`and publisher_id = ${f.publisherId}`;
  const protocol = f.protocol === undefined ? sql`` : sql`and protocol = ${f.protocol}`;
  const value = f.value === undefined ? sql`` : valueCondition(sql, f.value);
  const bool = f.boolValue === undefined ? sql`` : sql`and bool_value = ${f.boolValue}`;
  const string = f.stringValue === undefined ? sql`` : sql`and string_value = ${f.stringValue}`;
  const data = f.dataValue === undefined ? sql`` : sql`and data_value = ${f.dataValue}`;
  const from = f.from === undefined ? sql`` : sql`and time >= ${f.from}`;
  const to = f.to === undefined ? sql`` : sql`and time <= ${f.to}`;
  return sql`channel_id = ${f.channelId} ${name} ${subtopic} ${publisher} ${protocol} ${value} ${bool} ${string} ${data} ${from} ${to}`;
}

export interface PageRow extends MessageRow {
  /** The exact total for the filter, repeated on every row (text: bigint). */
  total: string;
}

// What one stored message adds to a reader page besides its texts: keys, two UUIDs, numbers, punctuation.
const ROW_OVERHEAD_BYTES = 200;

/**
 * One round trip for a page and its total: newest measurement first (the (channel_id, time) index read
 * backwards, merged across partitions), and the total from the per-channel counters when unfiltered, or a count
 * over the index when filtered. The left join keeps one row (with null columns) when the page is empty,
 * so the total still arrives. The page's bytes are summed as it is read (octet_length reads a stored
 * value's size without its text): rows past maxBytes stay in the database, and overCap says the page was
 * cut, so a page of large values is refused without being loaded.
 */
export async function selectPage(sql: Queryable, f: ReadFilter, maxBytes: number): Promise<{ total: number; rows: MessageRow[]; overCap: boolean }> {
  const total = hasFilter(f)
    ? sql`select count(*) as n from messages where ${conditions(sql, f)}`
    : sql`select coalesce(sum(messages), 0) as n from message_counts where channel_id = ${f.channelId}`;
  const rows = await sql<(PageRow & { channel_id: string | null; running: string | null })[]>`
    select t.n::text as total, m.*
    from (${total}) t
    left join lateral (
      select * from (
        select p.*, sum(p.bytes) over (order by p.time desc rows between unbounded preceding and current row) as running
        from (
          select channel_id, publisher_id, protocol, subtopic, name, unit, time, value, string_value, bool_value, data_value, sum, update_time,
            (${ROW_OVERHEAD_BYTES} + coalesce(octet_length(name), 0) + coalesce(octet_length(unit), 0) + coalesce(octet_length(subtopic), 0)
              + coalesce(octet_length(string_value), 0) + coalesce(octet_length(data_value), 0))::int8 as bytes
          from messages where ${conditions(sql, f)}
          order by time desc limit ${f.limit} offset ${f.offset}
        ) p
      ) w
      where w.running - w.bytes <= ${maxBytes}
      order by w.running
    ) m on true`;
  const first = rows[0];
  const messages = first === undefined || first.channel_id === null ? [] : (rows as MessageRow[]);
  const last = rows[rows.length - 1];
  return { total: Number(first?.total ?? 0), rows: messages, overCap: Number(last?.running ?? 0) > maxBytes };
}

// ---- partitions ----

/** Names of the daily partitions (messages_pYYYYMMDD) that exist now. */
export async function selectPartitions(sql: Queryable): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name from pg_inherits i
    join pg_class c on c.oid = i.inhrelid
    join pg_class p on p.oid = i.inhparent
    where p.relname = 'messages' and p.relnamespace = current_schema()::regnamespace and c.relname ~ '^messages_p[0-9]{8}$'`;
  return rows.map((r) => r.name);
}

export async function tryMaintenanceLock(sql: Queryable, key: number): Promise<boolean> {
  const [row] = await sql<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(${key}) as ok`;
  return row?.ok === true;
}

export async function defaultHasRows(sql: Queryable, from: string, to: string): Promise<boolean> {
  const rows = await sql`select 1 from messages_default where received_at >= ${from}::timestamptz and received_at < ${to}::timestamptz limit 1`;
  return rows.length > 0;
}

/**
 * Creates one day's partition. When the DEFAULT partition already holds rows of that day (the task did
 * not run for longer than it creates ahead), they move into the new table before it is attached, which
 * is what PostgreSQL requires; counters are per day and stay right. Identifiers come from dates we
 * format ourselves, never from input.
 */
export async function createPartition(sql: Queryable, name: string, from: string, to: string, moveFromDefault: boolean): Promise<void> {
  if (!moveFromDefault) {
    await sql.unsafe(`create table if not exists ${name} partition of messages for values from ('${from}') to ('${to}')`);
    return;
  }
  await sql.unsafe(`create table ${name} (like messages including defaults including constraints)`);
  await sql.unsafe(`insert into ${name} select * from messages_default where received_at >= '${from}' and received_at < '${to}'`);
  await sql.unsafe(`delete from messages_default where received_at >= '${from}' and received_at < '${to}'`);
  await sql.unsafe(`alter table messages attach partition ${name} for values from ('${from}') to ('${to}')`);
}

export async function dropPartition(sql: Queryable, name: string, day: string): Promise<void> {
  await sql.unsafe(`drop table if exists ${name}`);
  await sql`delete from message_counts where day = ${day}::date`;
}

/** Rows older than the retention cutoff that landed in the DEFAULT partition, and their counters. */
export async function deleteExpiredDefaultRows(sql: Queryable, cutoffDay: string): Promise<number> {
  const rows = await sql`delete from messages_default where received_at < ${`${cutoffDay} 00:00:00+00`}::timestamptz`;
  await sql`delete from message_counts where day < ${cutoffDay}::date`;
  return rows.count;
}
