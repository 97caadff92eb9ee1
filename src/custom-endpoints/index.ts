// The custom-endpoints domain's public face: management over GraphQL, the routing table, the call route
// on the management listener, the execution log and its retention.
import type { AuditWriter } from '../audit/writer.js';
import type { BearerAuthentication } from '../auth/bearer.js';
import type { AuthzService } from '../authz/index.js';
import type { Sql } from '../db/client.js';
import type { JsonBounds } from '../validate.js';
import type { BatchWriterOptions } from '../db/batch-writer.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { GraphqlExecutor } from '../graphql/executor.js';
import type { GraphqlModule } from '../graphql/schema.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { HttpServer } from '../http/server.js';
import type { Logger } from '../log.js';
import type { ExecutionStats } from './execute.js';
import { createExecutionLog, type ExecutionLog } from './execution-log.js';
import { createRequestSchemas } from './request-schema.js';
import { createExecutionRetention, type ExecutionRetention, type RetentionSettings } from './retention.js';
import { customEndpointsGraphqlModule } from './resolvers.js';
import { createRouter, type Router } from './router.js';
import { registerCustomEndpointRoutes } from './routes.js';
import { createEndpointService } from './service.js';

export type { Route, Router } from './router.js';

export interface CustomEndpointSettings {
  bodyLimitBytes: number;
  timeoutMs: number;
  logSummaryMaxBytes: number;
  retention: RetentionSettings;
  /** The most bytes one call's answer may have (SVC_ANSWER_MAX_BYTES). */
  answerMaxBytes: number;
}

export interface CustomEndpointsDeps {
  sql: Sql;
  hub: NotifyHub;
  authz: AuthzService;
  audit: AuditWriter;
  log: Logger;
  lists: { defaultLimit: number; maxLimit: number };
  /** Bounds of the mappings and request schemas an endpoint stores. */
  documents: JsonBounds;
  settings: CustomEndpointSettings;
  /** How deep a request body may nest (SVC_GRAPHQL_MAX_NESTING: the body becomes GraphQL variables). */
  maxNesting: number;
  /** Batching of the execution log (the audit writer's settings). */
  logWriter: BatchWriterOptions;
  /** The executor /graphql uses; built after the schema this domain contributes to, hence a getter. */
  executor: () => GraphqlExecutor;
}

export interface CustomEndpoints {
  graphqlModule(): GraphqlModule;
  /** Loads the routing table and follows changes (after the executor exists); starts the retention. */
  start(): Promise<void>;
  /** limiter: absent when rate limits are off. */
  registerRoutes(server: HttpServer, deps: { auth: BearerAuthentication; limiter: RateLimiter | undefined }): void;
  readonly router: Router;
  readonly executions: ExecutionLog;
  readonly retention: ExecutionRetention;
  /** Calls cut at the time limit and what was stopped of their work. */
  readonly stats: ExecutionStats;
  close(): Promise<void>;
}

export function createCustomEndpoints(deps: CustomEndpointsDeps): CustomEndpoints {
  const schemas = createRequestSchemas();
  const router = createRouter({ sql: deps.sql, hub: deps.hub, schemas, log: deps.log });
  const executions = createExecutionLog(deps.sql, { ...deps.logWriter, summaryMaxBytes: deps.settings.logSummaryMaxBytes }, deps.log);
  const retention = createExecutionRetention({ sql: deps.sql, log: deps.log, settings: deps.settings.retention });
  const stats: ExecutionStats = { timeouts: 0, refusedAfterTimeout: 0, statementsStopped: 0, abandonedEnded: 0 };
  const service = createEndpointService({
    sql: deps.sql, authz: deps.authz, audit: deps.audit, lists: deps.lists, documents: deps.documents, schemas, router,
    checkGraphql: (text) => deps.executor().check(text),
  });
  return {
    graphqlModule: () => customEndpointsGraphqlModule(service),
    async start() {
      await router.start();
      retention.start();
    },
    registerRoutes(server, r) {
      registerCustomEndpointRoutes(server, {
        router, auth: r.auth, authz: deps.authz, limiter: r.limiter, executions, sql: deps.sql, executor: deps.executor,
        settings: { ...deps.settings, maxNesting: deps.maxNesting }, stats, log: deps.log,
      });
    },
    router,
    executions,
    retention,
    stats,
    async close() {
      router.close();
      await retention.stop();
      await executions.close();
    },
  };
}
