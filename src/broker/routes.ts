// Broker admin API on its own listener: GET /api/v1/stats, /api/v1/cluster, /api/v1/overview. Other
// methods on those paths answer 405; unknown paths 404 (the server's fallback); failures 503
// { error: 'broker not available' }. Optional bearer token (README "Broker admin").
import { timingSafeEqual } from 'node:crypto';
import { isAppError, unauthenticated, unavailable } from '../errors.js';
import type { HttpServer } from '../http/server.js';
import { json, methodNotAllowed, type HttpRequest } from '../http/types.js';
import type { Logger } from '../log.js';
import type { WriterStats } from '../messaging/index.js';
import type { MqttBroker } from '../mqtt/index.js';
import type { NodeRegistry } from './node-registry.js';
import { buildStats } from './stats.js';

export interface BrokerAdminDeps {
  /** Undefined when this node runs no MQTT listener: the stats cannot be gathered (503). */
  mqtt: MqttBroker | undefined;
  registry: NodeRegistry;
  writerStats: () => WriterStats;
  /** When set, requests must carry `Authorization: Bearer <token>`. */
  token: string | undefined;
  /** The listener's bind host: without a token, anything but loopback is worth a warning at start. */
  host?: string;
  log: Logger;
}

const LOOPBACK = /^(127\.|localhost$|::1$|\[::1\]$)/;

const NOT_AVAILABLE = 'broker not available';

export function registerBrokerAdminRoutes(server: HttpServer, deps: BrokerAdminDeps): void {
  const { registry, log } = deps;
  const expected = deps.token === undefined ? undefined : Buffer.from(`Bearer ${deps.token}`);
  if (!expected && deps.host !== undefined && !LOOPBACK.test(deps.host)) {
    log.warn('broker admin listens beyond loopback without SVC_BROKER_ADMIN_TOKEN: anyone who reaches it reads the broker stats', { host: deps.host });
  }

  function checkToken(req: HttpRequest): void {
    if (!expected) return;
    const given = Buffer.from(req.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw unauthenticated();
  }

  const uptime = () => Math.round((Date.now() - registry.startedAt.getTime()) / 10) / 100;

  async function stats() {
    if (!deps.mqtt) throw unavailable(NOT_AVAILABLE);
    return buildStats(await deps.mqtt.snapshot(), deps.writerStats(), uptime());
  }

  async function cluster() {
    if (!deps.mqtt) throw unavailable(NOT_AVAILABLE);
    return registry.cluster();
  }

  async function overview() {
    if (!deps.mqtt) throw unavailable(NOT_AVAILABLE);
    const snapshot = await deps.mqtt.snapshot();
    const view = await registry.cluster();
    const s = buildStats(snapshot, deps.writerStats(), uptime());
    return {
      node_id: view.node_id,
      cluster_mode: view.cluster_mode,
      is_leader: view.is_leader,
      uptime_seconds: s.uptime_seconds,
      sessions: snapshot.sessions,
      stats: s,
      cluster: { nodes: view.nodes },
    };
  }

  const routes: [string, () => Promise<unknown>][] = [['/api/v1/stats', stats], ['/api/v1/cluster', cluster], ['/api/v1/overview', overview]];
  for (const [path, build] of routes) {
    server.route('ANY', path, async (req) => {
      if (req.method !== 'GET') return methodNotAllowed(req.method, ['GET'], { 'cache-control': 'no-store' });
      checkToken(req);
      try {
        return json(200, await build(), { 'cache-control': 'no-store' });
      } catch (err) {
        // Whatever kept the figures from being gathered (broker closed, database or Redis down) reads the same.
        if (!(isAppError(err) && err.kind === 'UNAVAILABLE')) log.warn('broker admin: stats not gathered', { path, err });
        throw unavailable(NOT_AVAILABLE, 1);
      }
    });
  }
}
