// Prometheus metrics (SVC_METRICS_ENABLED): one registry, one collector module per concern, GET /metrics
// on the management listener or, with SVC_METRICS_ADDR, on a listener of its own. Every collector reads
// counters the service keeps anyway, at scrape time: counting costs the hot paths no label lookups.
import type { Registry } from 'prom-client';
import type { AuthzService } from '../authz/index.js';
import type { CoapServer } from '../coap/index.js';
import type { CustomEndpoints } from '../custom-endpoints/index.js';
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { GraphqlExecutor } from '../graphql/executor.js';
import type { GrpcServer } from '../grpc/server.js';
import { createHttpServer, type HttpServer } from '../http/server.js';
import type { Logger } from '../log.js';
import type { MessagingService } from '../messaging/index.js';
import type { MqttBroker } from '../mqtt/index.js';
import type { WorkerPool } from '../worker-pool.js';
import { authzMetrics } from './authz.js';
import { coapMetrics } from './coap.js';
import { customEndpointMetrics } from './custom-endpoints.js';
import { databaseMetrics, type PoolLimit } from './database.js';
import { graphqlMetrics } from './graphql.js';
import { grpcMetrics } from './grpc.js';
import { httpMetrics } from './http.js';
import { ingestMetrics } from './ingest.js';
import { mqttMetrics } from './mqtt.js';
import { createRegistry } from './registry.js';
import { workerMetrics } from './workers.js';

export interface MetricsSources {
  /** HTTP listeners counted per route (measure() is called on each). */
  servers: readonly HttpServer[];
  graphql: GraphqlExecutor;
  authz: AuthzService;
  messaging: MessagingService;
  mqtt: MqttBroker | undefined;
  /** Listeners bound after the metrics are set up: read at scrape time. */
  coap: () => CoapServer | undefined;
  grpc: () => GrpcServer | undefined;
  customEndpoints: CustomEndpoints;
  workers: WorkerPool;
  sql: Sql;
  hub: NotifyHub;
  pools: readonly PoolLimit[];
  log: Logger;
}

export interface Metrics {
  readonly registry: Registry;
  /** GET /metrics on this server. */
  registerRoute(server: HttpServer): void;
  /** A listener of its own that answers only GET /metrics (SVC_METRICS_ADDR). */
  createListener(log: Logger): HttpServer;
}

export function createMetrics(sources: MetricsSources): Metrics {
  const registry = createRegistry();
  httpMetrics(registry, sources.servers);
  graphqlMetrics(registry, sources.graphql);
  authzMetrics(registry, sources.authz);
  ingestMetrics(registry, sources.messaging);
  if (sources.mqtt) mqttMetrics(registry, sources.mqtt);
  coapMetrics(registry, sources.coap);
  grpcMetrics(registry, sources.grpc);
  customEndpointMetrics(registry, sources.customEndpoints);
  workerMetrics(registry, sources.workers);
  databaseMetrics(registry, { sql: sources.sql, hub: sources.hub, pools: sources.pools, log: sources.log });

  const headers = Object.freeze({ 'content-type': registry.contentType });
  const metrics: Metrics = {
    registry,
    registerRoute(server) {
      // Unauthenticated (INTERFACES.md): bind it where only the scraper reaches, or use SVC_METRICS_ADDR.
      server.route('GET', '/metrics', async () => ({ status: 200, headers, body: await registry.metrics() }));
    },
    createListener(log) {
      const server = createHttpServer('metrics', log);
      metrics.registerRoute(server);
      return server;
    },
  };
  return metrics;
}
