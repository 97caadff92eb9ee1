// SQL of the node registry: heartbeats that also (re)take leadership, the node list with the lock holder.
import type { Queryable } from '../db/client.js';

/** The advisory lock whose holder is the cluster leader (single bigint key, like the migration lock). */
export const LEADER_LOCK_KEY = 7_346_260;

export interface NodeRow {
  id: string;
  address: string;
  started_at: Date;
  heartbeat_at: Date;
  healthy: boolean;
  leader: boolean;
  uptime_seconds: number;
}

/**
 * One round trip per heartbeat on the node's dedicated connection: keep the lock if this session holds it
 * (pg_try_advisory_lock would stack a second hold), else try to take it; then upsert the node's row with
 * this session's pid. Upsert, not update: a node paused past the prune bound gets its row back.
 */
export async function heartbeat(sql: Queryable, node: { id: string; address: string; startedAt: Date }): Promise<{ leader: boolean; pid: number }> {
  const [row] = await sql<{ leader: boolean; pid: number }[]>`
    with lead as (
      select case
        when exists (
          select 1 from pg_locks
          where locktype = 'advisory' and pid = pg_backend_pid() and granted
            and classid = 0 and objid = ${LEADER_LOCK_KEY} and objsubid = 1
        ) then true
        else pg_try_advisory_lock(${LEADER_LOCK_KEY})
      end as leader
    ), up as (
      insert into broker_nodes (id, address, started_at, heartbeat_at, lock_pid)
      values (${node.id}, ${node.address}, ${node.startedAt}, now(), pg_backend_pid())
      on conflict (id) do update set heartbeat_at = now(), address = excluded.address, lock_pid = excluded.lock_pid
      returning id
    )
    select lead.leader, pg_backend_pid() as pid from lead, up`;
  return row as { leader: boolean; pid: number };
}

/** Every registered node; leader = its recorded session holds the lock right now (from pg_locks). */
export async function listNodes(sql: Queryable, healthyWithinMs: number): Promise<NodeRow[]> {
  return sql<NodeRow[]>`
    select n.id, n.address, n.started_at, n.heartbeat_at,
      n.heartbeat_at > now() - make_interval(secs => ${healthyWithinMs / 1000}) as healthy,
      exists (
        select 1 from pg_locks l
        where l.locktype = 'advisory' and l.granted and l.pid = n.lock_pid
          and l.classid = 0 and l.objid = ${LEADER_LOCK_KEY} and l.objsubid = 1
          and l.database = (select oid from pg_database where datname = current_database())
      ) as leader,
      extract(epoch from now() - n.started_at)::float8 as uptime_seconds
    from broker_nodes n
    order by n.started_at, n.id`;
}

/** Rows of nodes silent for longer than the bound: a crashed instance leaves its row behind. */
export async function pruneNodes(sql: Queryable, silentForMs: number): Promise<number> {
  const rows = await sql`delete from broker_nodes where heartbeat_at < now() - make_interval(secs => ${silentForMs / 1000})`;
  return rows.count;
}

export async function deleteNode(sql: Queryable, id: string): Promise<void> {
  await sql`delete from broker_nodes where id = ${id}`;
}

export async function releaseLeadership(sql: Queryable): Promise<void> {
  await sql`select pg_advisory_unlock_all()`;
}
