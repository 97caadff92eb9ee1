// This instance's row in the cluster node registry, its heartbeat, and leadership through a PostgreSQL
// advisory lock held on a dedicated connection (exactly one holder among live sessions; released by
// PostgreSQL when the holder's connection ends, so a stopped or crashed leader fails over by itself).
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { reconnectDelaySecs, type Sql } from '../db/client.js';
import type { Logger } from '../log.js';
import { deleteNode, heartbeat, listNodes, pruneNodes, releaseLeadership } from './queries.js';

export interface ClusterNode {
  id: string;
  address: string;
  healthy: boolean;
  leader: boolean;
  uptime_seconds: number;
}

export interface ClusterView {
  node_id: string;
  cluster_mode: boolean;
  is_leader: boolean;
  nodes: ClusterNode[];
}

export interface NodeRegistry {
  readonly nodeId: string;
  readonly startedAt: Date;
  /** Leadership as of the last heartbeat (false while the database cannot confirm it). */
  isLeader(): boolean;
  /** For single-runner jobs of other domains: called with the new state whenever it changes. */
  onLeadershipChange(listener: (leader: boolean) => void): () => void;
  /** The registry as the database sees it now; throws when it cannot be read. */
  cluster(): Promise<ClusterView>;
  start(address: string): Promise<void>;
  /** Deregisters: row deleted, lock released, connection closed. */
  stop(): Promise<void>;
}

export interface NodeRegistryOptions {
  url: string;
  sql: Sql;
  log: Logger;
  heartbeatMs: number;
  /** A node is healthy while its last heartbeat is younger than this. */
  staleMs: number;
  /** Rows silent for longer than this are deleted (by the leader). */
  pruneMs: number;
  nodeId?: string;
}

export function createNodeRegistry(options: NodeRegistryOptions): NodeRegistry {
  const { sql, log } = options;
  const nodeId = options.nodeId ?? randomUUID();
  const startedAt = new Date();
  const listeners = new Set<(leader: boolean) => void>();
  let leader = false;
  let address = '';
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failing = false;
  let beating: Promise<void> | undefined;

  // Its own connection: the lock belongs to a session, and pool connections come and go. No idle or
  // lifetime limit, since recycling the connection would hand leadership away for nothing.
  const conn = postgres(options.url, {
    max: 1,
    idle_timeout: undefined,
    max_lifetime: null,
    backoff: reconnectDelaySecs,
    connection: { application_name: 'svc-node' },
    onnotice: () => undefined,
    onclose: () => setLeader(false),
  } as postgres.Options<Record<string, never>>) as unknown as Sql;

  function setLeader(value: boolean): void {
    if (value === leader) return;
    leader = value;
    log.info(value ? 'cluster leadership acquired' : 'cluster leadership lost', { nodeId });
    for (const l of listeners) {
      try {
        l(value);
      } catch (err) {
        log.error('leadership listener failed', { err });
      }
    }
  }

  async function beat(): Promise<void> {
    try {
      const result = await heartbeat(conn, { id: nodeId, address, startedAt });
      if (failing) log.info('node heartbeat recovered', { nodeId });
      failing = false;
      setLeader(result.leader);
      if (result.leader) {
        const pruned = await pruneNodes(conn, options.pruneMs);
        if (pruned) log.info('pruned silent cluster nodes', { count: pruned });
      }
    } catch (err) {
      // Leadership that cannot be confirmed is given up: single-runner jobs must not run twice.
      setLeader(false);
      if (!failing) log.warn('node heartbeat failed', { nodeId, err });
      failing = true;
    }
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      beating = beat().finally(schedule);
    }, options.heartbeatMs);
    timer.unref();
  }

  return {
    nodeId,
    startedAt,
    isLeader: () => leader,
    onLeadershipChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async cluster() {
      const rows = await listNodes(sql, options.staleMs);
      const nodes = rows.map((r) => ({ id: r.id, address: r.address, healthy: r.healthy, leader: r.leader, uptime_seconds: r.uptime_seconds }));
      return {
        node_id: nodeId,
        cluster_mode: nodes.filter((n) => n.healthy).length > 1,
        is_leader: nodes.some((n) => n.id === nodeId && n.leader),
        nodes,
      };
    },
    async start(addr) {
      address = addr;
      // The first heartbeat registers the node; failing here fails the start, like the database itself.
      const result = await heartbeat(conn, { id: nodeId, address, startedAt });
      setLeader(result.leader);
      log.info('cluster node registered', { nodeId, address, leader: result.leader });
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await beating;
      try {
        await deleteNode(conn, nodeId);
        await releaseLeadership(conn);
      } catch (err) {
        log.warn('node deregistration failed; the row is pruned once silent', { nodeId, err });
      }
      setLeader(false);
      await conn.end({ timeout: 5 });
    },
  };
}
