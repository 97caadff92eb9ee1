// Composition root: config → database → workers → services → listeners. Nothing happens at import time;
// run as a program it starts the service and stops it cleanly on SIGTERM/SIGINT.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createAuditWriter, type AuditWriter } from './audit/writer.js';
import { authzGraphqlModule, authzGrpcService, createAuthz, createCheckRuntime, registerAuthzRoutes, type AuthzService } from './authz/index.js';
import { aliasGrpcService, createAliasService } from './aliases/index.js';
import { authGrpcService, createAuth, createLogMailer, type Auth, type Mailer } from './auth/index.js';
import { ConfigError, describeConfig, loadConfig, type Addr, type Config } from './config.js';
import { createGenericPlanPool, createPool, poolCounts, type Sql } from './db/client.js';
import { scopedPool } from './db/statement-scope.js';
import { startEmbeddedPostgres } from './db/embedded.js';
import { migrate, pendingMigrations } from './db/migrate.js';
import { createNotifyHub, type NotifyHub } from './db/notify-hub.js';
import { baseGraphqlModule } from './graphql/base-module.js';
import type { Authenticate } from './graphql/context.js';
import { createGraphqlExecutor, type GraphqlExecutor } from './graphql/executor.js';
import { registerGraphqlRoute } from './graphql/http.js';
import { buildSchema } from './graphql/schema.js';
import { createGrpcServer, type GrpcServer } from './grpc/server.js';
import { registerHealthRoutes } from './health/routes.js';
import { healthGraphqlModule } from './health/resolvers.js';
import { createHealth } from './health/service.js';
import { createRateLimiter, type RateLimiter } from './http/rate-limit.js';
import { createHttpServer, type HttpServer } from './http/server.js';
import { nativeUws } from './http/uws.js';
import { createLogger, type Logger } from './log.js';
import { migrationsDir, projectRoot } from './paths.js';
import { createWorkerPool, type WorkerPool } from './worker-pool.js';
import { caKeysWorkerData, createCaKeys, type CaKeys } from './pki/keys/index.js';
import { certificateGrpcService, createCertificateResolution, createPki, listenerBaseUrl, prepareDevCa, type Pki } from './pki/index.js';
import { createEnrollmentListener, type EnrollmentListener } from './pki/enrollment/index.js';
import { createLifecycleSweeper } from './pki/lifecycle/sweeper.js';
import { createOutboxRelay } from './pki/outbox/relay.js';
import { createIdentityService, identityGraphqlModule } from './identity/index.js';
import { createProfilesService, profilesGraphqlModule } from './profiles/index.js';
import { createMembersService, createTenantsService, tenantsGraphqlModule } from './tenants/index.js';
import { createGroupService, createMembershipService, groupsGraphqlModule } from './groups/index.js';
import { createResourceService, resourcesGraphqlModule } from './resources/index.js';
import { createMessaging, registerLiveRoute, registerPublishRoutes, registerReaderRoutes, type MessagingService } from './messaging/index.js';
import { createPolicyServices, policiesGraphqlModule } from './policies/index.js';
import { createAssignmentService, createRoleService, rolesGraphqlModule } from './roles/index.js';
import { auditGraphqlModule, createAuditReader, createAuditRetention, registerAuditRoutes, type AuditRetention } from './audit/index.js';
import type { Invalidation } from './authz/types.js';
import { createNodeRegistry, registerBrokerAdminRoutes, type NodeRegistry } from './broker/index.js';
import { createCoapServer, type CoapServer } from './coap/index.js';
import { createMqttBroker, registerMqttWebSocket, type MqttBroker } from './mqtt/index.js';
import { readPemFile } from './pem-files.js';
import { createCustomEndpoints, type CustomEndpoints } from './custom-endpoints/index.js';
import { createMetrics, type Metrics } from './metrics/index.js';

export type ListenerName = 'http' | 'messaging' | 'reader' | 'broker_admin' | 'mqtt' | 'mqtts' | 'coap' | 'grpc' | 'metrics' | 'enrollment' | 'pki_publication';

export interface Service {
  config: Config;
  log: Logger;
  sql: Sql;
  hub: NotifyHub;
  audit: AuditWriter;
  /** Deletes audit entries past SVC_AUDIT_RETENTION_DAYS when enabled (tests call run()). */
  auditRetention: AuditRetention;
  workers: WorkerPool;
  /** The certificate authority's keys (both backends), signing in the worker pool. */
  caKeys: CaKeys;
  /** The certificate authority: issuance, revocation and lookups for every entry point. */
  pki: Pki;
  graphql: GraphqlExecutor;
  authz: AuthzService;
  auth: Auth;
  limiter: RateLimiter;
  messaging: MessagingService;
  /** Custom API endpoints: routing table, execution log. */
  customEndpoints: CustomEndpoints;
  /** This instance in the cluster node registry; isLeader() gates single-runner jobs of any domain. */
  registry: NodeRegistry;
  /** The gRPC listener, when SVC_GRPC_ADDR is not off (its call counters are read by tests). */
  grpc?: GrpcServer;
  /** The MQTT broker, when SVC_MQTT_ADDR is not off. */
  mqtt: MqttBroker | undefined;
  /** Prometheus metrics, when SVC_METRICS_ENABLED. */
  metrics: Metrics | undefined;
  /** Bound ports by listener (port 0 in config resolves to the real one here). */
  ports: Partial<Record<ListenerName, number>>;
  /** Every HTTP route of the running listeners, as registered (the tenant-isolation matrix enumerates them). */
  routes(): { listener: ListenerName; method: string; route: string }[];
  stop(): Promise<void>;
}

const version = (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;

export async function startService(env: Record<string, string | undefined>, options: { log?: Logger; mailer?: Mailer } = {}): Promise<Service> {
  const config = loadConfig(env);
  // Before anything is started or migrated: a missing native uWS binary is a broken install, not a degraded mode.
  nativeUws();
  const log = options.log ?? createLogger(config.logLevel);
  log.info('starting', { version, ...describeConfig(config) });

  // Everything started is stopped in reverse order, on shutdown and on a failed start alike.
  const closers: { name: string; close: () => Promise<void> | void }[] = [];
  const stopAll = async () => {
    for (const { name, close } of closers.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        log.error('error while stopping', { component: name, err });
      }
    }
  };

  try {
    let url = config.database.url;
    if (!url) {
      const embedded = await startEmbeddedPostgres(config.database.embedded.dataDir, config.database.embedded.port, log);
      closers.push({ name: 'embedded-postgres', close: embedded.stop });
      url = embedded.url;
    }
    const sql = createPool(url, config.database, log);
    closers.push({ name: 'database pool', close: () => sql.end({ timeout: 5 }) });
    await migrate(sql, migrationsDir, log);

    // The services a custom endpoint call may run get the pool through a statement scope, so a call cut at
    // its time limit cancels what it still runs there (db/statement-scope.ts). Token verification,
    // authorization, messaging and the certificate authority's caches and batched writes keep the bare
    // pool: they carry other callers' work, which one call's limit must not cancel.
    const domainSql = scopedPool(sql);
    const hub = createNotifyHub(url, sql, log);
    await hub.start();
    closers.push({ name: 'notify hub', close: () => hub.close() });

    const audit = createAuditWriter(sql, { ...config.audit, details: config.documents }, log);
    closers.push({ name: 'audit writer', close: () => audit.close() });
    const auditRetention = createAuditRetention(sql, config.audit.retention, log);
    closers.push({ name: 'audit retention', close: () => auditRetention.close() });
    auditRetention.start();

    // The development CA (SVC_PKI_DEV_CA): its files are made or reused before the keys and authorities load.
    const pkiConfig = config.pki.devCa.active ? {
      ...config.pki, caKeyEncryptionKey: await prepareDevCa({ sql, log: log.child({ component: 'pki' }) }, config.pki.devCa.files, config.pki.caKeyEncryptionKey),
    } : config.pki;
    const caKeysData = caKeysWorkerData(pkiConfig);
    const workers = createWorkerPool({ ...config.workers, workerData: { caKeys: caKeysData }, keepThreads: caKeysData.pkcs11 !== null });
    closers.push({ name: 'worker pool', close: () => workers.close() });
    // With PKCS#11 configured this opens the token: a wrong module, label or PIN stops the start here.
    const caKeys = await createCaKeys({ workers, config: pkiConfig, log });
    closers.push({ name: 'ca keys', close: () => caKeys.close() });

    const health = createHealth({ version, revision: config.revision });
    health.register('database', async () => {
      await sql`select 1`;
      return { status: 'ok', message: 'reachable' };
    }, { critical: true });
    health.register('migrations', async () => {
      const pending = await pendingMigrations(sql, migrationsDir);
      return pending.length ? { status: 'error', message: `pending: ${pending.join(', ')}` } : { status: 'ok', message: 'all applied' };
    }, { critical: true });
    health.register('workers', async () => {
      const r = await workers.run<{ ok: boolean }>('ping', { at: Date.now() });
      return r.ok ? { status: 'ok', message: `${config.workers.threads} worker threads answering` } : { status: 'error', message: 'worker did not answer' };
    });
    health.register('ca_keys', () => {
      const d = caKeys.describe();
      return d.status === 'ok' ? { status: 'ok', message: `new authority keys on ${config.pki.caKeyBackend}` } : { status: 'degraded', message: String(d.message) };
    });
    health.register('notifications', () => (hub.connected
      ? { status: 'ok', message: 'LISTEN connection up' } : { status: 'degraded', message: 'LISTEN connection down; caches expire by TTL' }));
    // Details for platform readers only (GraphQL systemStatus); GET /health shows component states.
    // postgres.js keeps no minimum and has no acquire timeout (null, not guessed); the open and idle
    // connections are its own counts (patches/postgres+3.4.9.patch), this instance's pool only.
    health.describe('db_pool', () => {
      const counts = poolCounts(sql);
      return {
        max_connections: config.database.poolMax, min_connections: 0, acquire_timeout_secs: null, connect_timeout_secs: config.database.connectTimeoutSecs,
        idle_timeout_secs: config.database.idleTimeoutSecs, max_lifetime_secs: config.database.maxLifetimeSecs, size: counts?.size ?? null, idle: counts?.idle ?? null,
      };
    });
    health.describe('audit_retention', () => auditRetention.status());
    health.describe('rate_limits', () => ({
      enabled: config.rateLimits.enabled,
      policies: Object.entries(config.rateLimits.policies).map(([category, p]) => ({ category, max_requests: p.max, window_secs: p.windowSecs })),
      trusted_proxy_cidrs: config.rateLimits.trustedProxyCidrs,
    }));

    const limiter = createRateLimiter(config.rateLimits);
    const authzLookups = createGenericPlanPool(url, { name: 'svc-authz', max: config.authz.dbConnections, connectTimeoutSecs: config.database.connectTimeoutSecs });
    closers.push({ name: 'authz connections', close: () => authzLookups.end({ timeout: 5 }) });
    const authz = createAuthz({ sql, lookups: authzLookups, hub, audit, log, config: config.authz });
    closers.push({ name: 'authz', close: () => authz.close() });
    // Development default: messages are logged; tests pass a capturing mailer, deployments a real one.
    const mailer = options.mailer ?? createLogMailer(log);
    const auth = createAuth({ sql, scopedSql: domainSql, hub, audit, authz, config, log, limiter, mailer });
    await auth.init();
    closers.push({ name: 'auth', close: () => auth.close() });
    auth.registerHealth(health);
    const authenticate: Authenticate = auth.authenticate;
    // Device messaging: one publish pipeline for HTTP, MQTT and CoAP. Closed after the listeners, so the
    // writer commits what they accepted before the pool goes.
    const messaging = createMessaging({
      url, sql, auth, authz, settings: config.messaging, connectTimeoutSecs: config.database.connectTimeoutSecs, log, hub,
    });
    closers.push({ name: 'messaging', close: () => messaging.close() });
    await messaging.start();
    const authzRuntime = createCheckRuntime(authz);

    // One fan-out for every cache that may hold changed facts: decisions (authz) and verified tokens (auth).
    const invalidate = async (change: Invalidation) => {
      await authz.invalidate(change);
      await auth.invalidate(toAuthInvalidation(change));
    };
    const lists = config.lists;
    // Plain list pages on connections of their own with generic plans (db/paging.ts listingSql), scoped
    // like the shared pool so a custom endpoint's time limit reaches them too.
    const listConnections = createGenericPlanPool(url, { name: 'svc-lists', max: lists.dbConnections, connectTimeoutSecs: config.database.connectTimeoutSecs });
    closers.push({ name: 'list connections', close: () => listConnections.end({ timeout: 5 }) });
    const pages = scopedPool(listConnections);
    // Every JSON document a caller stores is bounded in bytes and nesting (SVC_JSON_DOCUMENT_MAX_*).
    const documents = config.documents;
    // The certificate authority (issue 25): authorities from configuration, tenant issuers, issuance, revocation.
    const pki = createPki({
      sql, scopedSql: domainSql, hub, authz, audit, keys: caKeys, workers, log: log.child({ component: 'pki' }),
      settings: {
        publicationBaseUrl: config.pki.publicationBaseUrl, rootCertPath: config.pki.rootCertPath,
        platformIntermediateCertPath: config.pki.platformIntermediateCertPath, platformIntermediateKeyPath: config.pki.platformIntermediateKeyPath,
        caKeyBackend: config.pki.caKeyBackend, authorityKeyAlgorithm: config.pki.authorityKeyAlgorithm, authorityTtlSecs: config.pki.authorityTtlSecs,
        maxCsrBytes: config.pki.enrollment.maxCsrBytes, generatedKeyIssuance: config.pki.generatedKeyIssuanceEnabled, lists,
        profileExtendedKeyUsages: config.pki.profileExtendedKeyUsagesEnabled,
        pkcs11MaxInFlight: config.pki.pkcs11.maxInFlight, publication: config.pki.publication,
      },
    });
    // The publication listener (node:http, HTTP/1.0 and 1.1) binds before the authorities load, so the
    // address certificates embed is known before anything can be issued; its routes read only the database.
    const ports: Service['ports'] = {};
    if (config.listeners.pkiPublication) {
      const { host, port } = config.listeners.pkiPublication;
      const publication = pki.publicationListener(limiter, config.rateLimits);
      ports.pki_publication = await publication.listen(host, port);
      closers.push({ name: 'pki publication listener', close: () => publication.close() });
      log.info('listening', { listener: 'pki_publication', host, port: ports.pki_publication });
      pki.followPublicationAddress(listenerBaseUrl(host, ports.pki_publication));
    }
    await pki.init();
    closers.push({ name: 'pki', close: () => pki.close() });
    // Expiry notices (one sweeper across instances) and outbox delivery (one relay), issue 27.
    if (config.pki.lifecycle.enabled) {
      const sweeper = createLifecycleSweeper({ sql, log: log.child({ component: 'pki-lifecycle' }), settings: config.pki.lifecycle });
      sweeper.start();
      closers.push({ name: 'pki lifecycle sweeper', close: () => sweeper.stop() });
    }
    if (config.pki.outbox.webhookUrl || config.pki.outbox.notifyChannel) {
      const relay = createOutboxRelay({ url, sql, log: log.child({ component: 'pki-outbox' }), settings: config.pki.outbox });
      relay.start();
      closers.push({ name: 'pki outbox relay', close: () => relay.stop() });
    }
    const profiles = createProfilesService({ sql: domainSql, authz, audit, lists, documents });
    const identity = createIdentityService({ sql: domainSql, pages, authz, audit, invalidate, lists, documents, profiles, certificates: pki.entityHooks });
    const tenants = createTenantsService({
      sql: domainSql, pages, authz, audit, invalidate, lists, documents, retentionSecs: config.tenantRetentionSecs, seedTenant: profiles.seedTenant,
      certificates: pki.tenantHooks,
    });
    const members = createMembersService({
      sql: domainSql, authz, audit, tenants, invalidate, lists, mailer,
      invitationExpirySecs: config.auth.invitationExpirySecs, publicBaseUrl: config.publicBaseUrl,
    });

    const resources = createResourceService({ sql: domainSql, pages, authz, audit, invalidate, lists, documents });
    const groups = createGroupService({ sql: domainSql, pages, authz, audit, invalidate, lists, documents });
    const groupMembership = createMembershipService({ sql: domainSql, authz, audit, invalidate });
    const policies = createPolicyServices({ sql: domainSql, authz, audit, invalidate, lists, documents });
    const roles = createRoleService({ sql: domainSql, authz, audit, invalidate, lists });
    const roleAssignments = createAssignmentService({ sql: domainSql, authz, audit, invalidate, lists });
    const auditReader = createAuditReader({ sql: domainSql, pages, authz, audit, lists });
    // Custom endpoints run their operations through the executor built below from the schema they extend.
    let graphqlExecutor: GraphqlExecutor | undefined;
    const customEndpoints = createCustomEndpoints({
      sql, hub, authz, audit, log, lists, documents, settings: config.customEndpoints, maxNesting: config.graphql.maxNesting, logWriter: config.audit,
      executor: () => {
        if (!graphqlExecutor) throw new Error('custom endpoints used before the GraphQL executor exists');
        return graphqlExecutor;
      },
    });
    closers.push({ name: 'custom endpoints', close: () => customEndpoints.close() });

    const schema = buildSchema([baseGraphqlModule(), auth.graphqlModule(), authzGraphqlModule(authzRuntime),
      identityGraphqlModule(identity), tenantsGraphqlModule(tenants, members), profilesGraphqlModule(profiles),
      resourcesGraphqlModule(resources), groupsGraphqlModule(groups, groupMembership),
      rolesGraphqlModule(roles, roleAssignments), policiesGraphqlModule(policies), auditGraphqlModule(auditReader),
      healthGraphqlModule(health, authz), pki.graphqlModule(), customEndpoints.graphqlModule()]);
    const graphql = createGraphqlExecutor(schema, {
      introspection: config.graphql.introspection,
      maxDepth: config.graphql.maxDepth,
      maxComplexity: config.graphql.maxComplexity,
      maxTokens: config.graphql.maxTokens,
      maxNesting: config.graphql.maxNesting,
      maxFragments: config.graphql.maxFragments,
      maxAliases: config.graphql.maxAliases,
      cacheSize: config.graphql.compiledQueryCacheSize,
      maxPageSize: config.lists.maxLimit,
      jsonFieldCost: config.graphql.jsonFieldCost,
      answerMaxBytes: config.graphql.answerMaxBytes,
    }, log);
    graphqlExecutor = graphql;
    await customEndpoints.start();

    const servers = new Map<ListenerName, { server: HttpServer; addr: NonNullable<Addr> }>();
    const http = createHttpServer('http', log);
    registerHealthRoutes(http, health);
    auth.registerRoutes(http);
    registerGraphqlRoute(http, { executor: graphql, authenticate, bodyLimit: config.graphql.bodyLimitBytes });
    const bearer = { authenticate, peek: auth.peekBearer };
    registerAuthzRoutes(http, { runtime: authzRuntime, auth: bearer, bodyLimit: config.authz.bodyLimitBytes });
    registerAuditRoutes(http, { reader: auditReader, auth: bearer });
    pki.registerPublicRoutes(http, limiter);
    customEndpoints.registerRoutes(http, { auth: bearer, limiter: config.rateLimits.enabled ? limiter : undefined });
    if (config.listeners.http) servers.set('http', { server: http, addr: config.listeners.http });
    const deviceAuth = { authenticate, authenticateDeviceKey: auth.authenticateDeviceKey };
    const ingest = createHttpServer('messaging', log);
    registerPublishRoutes(ingest, messaging);
    const live = registerLiveRoute(ingest, messaging, { ...deviceAuth, log, settings: config.messaging.live });
    closers.push({ name: 'live subscriptions', close: live.close });
    if (config.listeners.messaging) servers.set('messaging', { server: ingest, addr: config.listeners.messaging });
    const reader = createHttpServer('reader', log);
    registerReaderRoutes(reader, messaging, deviceAuth);
    if (config.listeners.reader) servers.set('reader', { server: reader, addr: config.listeners.reader });
    // Certificate resolution (gRPC ResolveCertificateV2) and the client-certificate verifier of every TLS
    // listener (enrollment, MQTT over TLS, gRPC mTLS) share one cache, dropped on revocation on every instance.
    const resolution = createCertificateResolution({
      sql, hub, certificates: pki.certificates, revocation: pki.revocation, admit: authzRuntime.admitCaller, settings: config.grpc.certificateCache,
    });
    closers.push({ name: 'certificate resolution', close: async () => resolution.close() });
    const clientCertificates = pki.clientCertificates(resolution);
    closers.push({ name: 'client certificates', close: async () => clientCertificates.close() });
    // Broker (issue 7): node registry, MQTT broker over the same pipeline, broker admin on its own listener.
    const b = config.broker;
    const registry = createNodeRegistry({ url, sql, log, heartbeatMs: b.nodeHeartbeatMs, staleMs: b.nodeStaleMs, pruneMs: b.nodePruneSecs * 1000 });
    const mqtt = config.listeners.mqtt || config.listeners.mqtts ? await createMqttBroker({
      auth, messaging, authz, log, config: {
        denyAction: b.mqttDenyAction, revalidateSecs: b.mqttRevalidateSecs, brokerId: registry.nodeId, maxPacketBytes: b.mqttMaxPacketBytes,
        maxSubscriptions: b.mqttMaxSubscriptions,
        redis: b.redisUrl ? { url: b.redisUrl, keyPrefix: b.redisKeyPrefix } : undefined,
      },
    }) : undefined;
    if (mqtt) {
      closers.push({ name: 'mqtt broker', close: () => mqtt.close(config.shutdownTimeoutSecs * 1000) });
      // MQTT over WebSocket at /mqtt on the messaging listener, for clients that can only speak HTTP.
      registerMqttWebSocket(ingest, mqtt, { maxPacketBytes: b.mqttMaxPacketBytes, log });
    }
    const brokerAdmin = createHttpServer('broker_admin', log);
    registerBrokerAdminRoutes(brokerAdmin, {
      mqtt, registry, writerStats: () => messaging.stats(), token: b.adminToken, host: config.listeners.brokerAdmin?.host, log,
    });
    if (config.listeners.brokerAdmin) servers.set('broker_admin', { server: brokerAdmin, addr: config.listeners.brokerAdmin });
    // Prometheus metrics (issue 24): read at scrape time from the counters above; gRPC and CoAP bind later.
    let coapServer: CoapServer | undefined;
    let grpc: GrpcServer | undefined;
    const metrics = config.metricsEnabled ? createMetrics({
      servers: [http, ingest, reader, brokerAdmin], graphql, authz, messaging, mqtt, coap: () => coapServer, grpc: () => grpc, customEndpoints, workers, sql, hub, log,
      pools: [{ pool: 'svc', max: config.database.poolMax }, { pool: 'svc-authz', max: config.authz.dbConnections },
        { pool: 'svc-writer', max: config.messaging.writer.connections }, { pool: 'svc-reader', max: config.messaging.reader.connections }],
    }) : undefined;
    if (metrics && config.metricsAddr) servers.set('metrics', { server: metrics.createListener(log), addr: config.metricsAddr });
    else metrics?.registerRoute(http);

    // The HTTP API is ready when the service is (upstream's meaning); gRPC when its listener is bound.
    const where = (addr: NonNullable<Addr>, port: number | undefined) => `${addr.host}:${port ?? addr.port}`;
    health.derive('http_ready', ({ ready, failing }) => {
      const addr = config.listeners.http;
      if (!addr) return { status: 'disabled', message: 'no HTTP API listener (SVC_HTTP_ADDR is off)' };
      return ready ? { status: 'ok', message: `ready; serving on ${where(addr, ports.http)}` } : { status: 'error', message: `not ready: ${failing.join(', ')} failing` };
    });
    health.register('grpc_ready', () => {
      const addr = config.listeners.grpc;
      if (!addr) return { status: 'disabled', message: 'no gRPC listener (SVC_GRPC_ADDR is off)' };
      return ports.grpc === undefined ? { status: 'degraded', message: 'starting' } : { status: 'ok', message: `serving on ${where(addr, ports.grpc)}` };
    });
    for (const [name, { server, addr }] of servers) {
      ports[name] = await server.listen(addr.host, addr.port);
      closers.push({ name: `${name} listener`, close: () => server.close() });
      log.info('listening', { listener: name, host: addr.host, port: ports[name] });
    }
    // No publication listener and no SVC_PKI_PUBLICATION_BASE_URL: the management listener's /certs routes
    // (HTTP/1.1 only), so certificates still name a place that answers.
    if (!pki.publicationBase.known() && config.listeners.http && ports.http !== undefined) {
      pki.followPublicationAddress(listenerBaseUrl(config.listeners.http.host, ports.http));
      log.warn('SVC_PKI_PUBLICATION_ADDR is off: certificate URLs point at the management listener, which HTTP/1.0 clients (openssl ocsp) cannot reach; set SVC_PKI_PUBLICATION_BASE_URL to where the publication routes are served');
    } else if (!pki.publicationBase.known()) {
      log.warn('no publication address (SVC_PKI_PUBLICATION_ADDR and SVC_HTTP_ADDR off, SVC_PKI_PUBLICATION_BASE_URL unset): this instance issues no certificates');
    }
    if (config.listeners.grpc) {
      const server = createGrpcServer(log, config.grpc, { clientCertificates, verifyToken: auth.verifyToken });
      grpc = server;
      const { unary } = server;
      const verifyToken = auth.verifyToken;
      const admit = authzRuntime.admitCaller;
      server.addService('AuthzService', authzGrpcService({ runtime: authzRuntime, verifyToken, unary }));
      server.addService('AuthService', authGrpcService({ verifyToken, authenticateCredential: auth.authenticateCredential, admit, unary }));
      server.addService('AliasService', aliasGrpcService({ aliases: createAliasService({ sql, admit }), verifyToken, unary }));
      server.addService('CertificateService', certificateGrpcService({ resolution, verifyToken, unary }));
      ports.grpc = await server.listen(config.listeners.grpc.host, config.listeners.grpc.port);
      closers.push({ name: 'grpc listener', close: () => server.close(config.shutdownTimeoutSecs * 1000) });
      log.info('listening', { listener: 'grpc', host: config.listeners.grpc.host, port: ports.grpc });
    }
    // Certificate enrollment over TLS (issue 27), opt-in: native enroll/reenroll and EST.
    let enrollment: EnrollmentListener | undefined;
    const enrollAddr = config.pki.enrollment.listen;
    if (config.pki.enrollment.enabled && enrollAddr) {
      const e = config.pki.enrollment;
      enrollment = createEnrollmentListener({
        settings: e, rateLimitsEnabled: config.rateLimits.enabled, generatedKeyIssuance: config.pki.generatedKeyIssuanceEnabled,
        pki, auth, limiter, hub, log: log.child({ component: 'enrollment' }), clientCertificates,
      });
      const listener = enrollment;
      ports.enrollment = await listener.listen(enrollAddr.host, enrollAddr.port);
      closers.push({ name: 'enrollment listener', close: () => listener.close() });
      log.info('listening', { listener: 'enrollment', host: enrollAddr.host, port: ports.enrollment });
    }
    /** Binds a protocol listener; one left at its default address steps aside when the port is taken. */
    async function bindProtocol(name: 'mqtt' | 'coap', setting: string, addr: NonNullable<Addr>, bind: () => Promise<number>): Promise<number | undefined> {
      try {
        const port = await bind();
        log.info('listening', { listener: name, host: addr.host, port });
        return port;
      } catch (err) {
        if (!config.listenersAtDefault[name] || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        log.warn(`${name} listener not started: its default address ${addr.host}:${addr.port} is in use (another broker?); set ${setting} to a free address, or to off`);
        return undefined;
      }
    }
    if (mqtt && config.listeners.mqtt) {
      const addr = config.listeners.mqtt;
      ports.mqtt = await bindProtocol('mqtt', 'SVC_MQTT_ADDR', addr, () => mqtt.listen(addr.host, addr.port));
    }
    const mqttTls = b.mqttTls;
    if (mqtt && config.listeners.mqtts && mqttTls.certPath && mqttTls.keyPath) {
      // Asked for by its certificate: it must bind, unlike the plaintext default that steps aside.
      const addr = config.listeners.mqtts;
      ports.mqtts = await mqtt.listenTls(addr.host, addr.port, {
        cert: readPemFile(mqttTls.certPath, 'MQTT TLS certificate'), key: readPemFile(mqttTls.keyPath, 'MQTT TLS key'),
        clientCa: mqttTls.clientCaPath ? readPemFile(mqttTls.clientCaPath, 'MQTT TLS client CA') : undefined, clientCertificates,
      });
      log.info('listening', { listener: 'mqtts', host: addr.host, port: ports.mqtts });
    }
    if (config.listeners.coap) {
      const addr = config.listeners.coap;
      const coap = createCoapServer({
        messaging, log, authenticateDeviceKey: auth.authenticateDeviceKey,
        blocks: { maxMessageBytes: config.messaging.maxMessageBytes, maxHeldBytes: b.coapMaxBlockBytesHeld, timeoutMs: b.coapBlockTimeoutSecs * 1000 },
        observe: { maxObservations: b.coapMaxObservations, maxPerDevice: b.coapMaxObservationsPerDevice, revalidateSecs: b.coapRevalidateSecs },
        responseCacheBytes: b.coapResponseCacheBytes,
      });
      ports.coap = await bindProtocol('coap', 'SVC_COAP_ADDR', addr, () => coap.listen(addr.host, addr.port));
      coapServer = coap;
      if (ports.coap !== undefined) closers.push({ name: 'coap listener', close: () => coap.close(config.shutdownTimeoutSecs * 1000) });
    }
    await registry.start(b.nodeAddress ?? `${hostname()}:${ports.mqtt ?? ports.broker_admin ?? ports.http ?? 0}`);
    closers.push({ name: 'node registry', close: () => registry.stop() });

    let stopping: Promise<void> | undefined;
    const service: Service = {
      config, log, sql, hub, audit, auditRetention, workers, caKeys, pki, graphql, authz, auth, limiter, messaging, customEndpoints, registry, mqtt, grpc, metrics, ports,
      routes: () => [
        ...[...servers].flatMap(([listener, { server }]) => server.routeStats.map((r) => ({ listener, method: r.method, route: r.route }))),
        ...(enrollment?.routes() ?? []).map((r) => ({ listener: 'enrollment' as const, ...r })),
      ],
      stop() {
        return (stopping ??= (async () => {
          log.info('stopping: no new connections; finishing requests in flight');
          const all = [...servers.values()].map((s) => s.server);
          for (const s of all) s.stopAccepting();
          mqtt?.stopAccepting();
          live.goingAway();
          enrollment?.stopAccepting();
          const drained = await Promise.all([...all.map((s) => s.drain(config.shutdownTimeoutSecs * 1000)), enrollment?.drain() ?? true]);
          if (drained.includes(false)) log.warn('shutdown timeout reached with requests still in flight');
          await stopAll();
          log.info('stopped');
        })());
      },
    };
    log.info('ready', { certificate_urls: pki.publicationBase.known() ? pki.publicationBase.url() : null });
    return service;
  } catch (err) {
    await stopAll();
    throw err;
  }
}

function toAuthInvalidation(change: Invalidation) {
  switch (change.kind) {
    case 'subjects': return { entities: change.entityIds };
    case 'objects': return { entities: change.objectIds };
    case 'tenants': return { tenants: change.tenantIds };
    case 'credentials': return { credentials: change.credentialIds };
    case 'all': return { all: true };
    default: return {};
  }
}

async function runAsProgram(): Promise<void> {
  let service: Service;
  try {
    service = await startService(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    if (err instanceof Error && err.cause) process.stderr.write(`cause: ${String((err.cause as Error).stack ?? err.cause)}\n`);
    process.exit(1);
  }
  const onSignal = (signal: NodeJS.Signals) => {
    service.log.info('signal received', { signal });
    const hardStop = setTimeout(() => {
      service.log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, (service.config.shutdownTimeoutSecs + 10) * 1000);
    hardStop.unref();
    service.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // postgres.js fetches array types on connect in a promise it never awaits: a connection killed at that
  // moment (a database restart) rejects it with nobody listening. That must not take the service down;
  // it is logged so a real bug of ours still shows.
  process.on('unhandledRejection', (reason) => service.log.error('unhandled rejection', { err: reason }));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) void runAsProgram();
