// The service's configuration: the only module that reads the environment; validates everything once.
import os from 'node:os';
import path from 'node:path';
import { ConfigError, createReader, type Addr } from './config-reader.js';

export { ConfigError };
export type { Addr };

const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function loadConfig(env: Record<string, string | undefined>, cwd = process.cwd()) {
  const r = createReader(env);

  const listeners = {
    http: r.addr('SVC_HTTP_ADDR', '0.0.0.0:8080'),
    messaging: r.addr('SVC_MESSAGING_ADDR', '0.0.0.0:8008'),
    reader: r.addr('SVC_READER_ADDR', '0.0.0.0:9009'),
    brokerAdmin: r.addr('SVC_BROKER_ADMIN_ADDR', '127.0.0.1:8082'),
    mqtt: r.addr('SVC_MQTT_ADDR', '0.0.0.0:1883'),
    coap: r.addr('SVC_COAP_ADDR', '0.0.0.0:5683'),
    grpc: r.addr('SVC_GRPC_ADDR', '0.0.0.0:8081'),
    // The public certificate routes (/certs: OCSP, CRLs, issuer certificates) on node:http, which also speaks
    // HTTP/1.0 as `openssl ocsp` and `openssl verify -crl_download` do (the uWS listeners answer only 1.1).
    // On by default: the URLs embedded in certificates point here unless SVC_PKI_PUBLICATION_BASE_URL says otherwise.
    pkiPublication: r.addr('SVC_PKI_PUBLICATION_ADDR', '0.0.0.0:8089'),
    // MQTT over TLS: only with a certificate and key (below); the plaintext listener may then be off.
    mqtts: r.optional('SVC_MQTT_TLS_CERT_PATH') === undefined ? null : r.addr('SVC_MQTTS_ADDR', '0.0.0.0:8883'),
  };

  // The protocol ports other brokers also take (a Mosquitto on 1883 is common on development machines):
  // left at their built-in address, such a listener steps aside with a warning when the port is in use,
  // so `npm start` runs there; an address the operator chose must bind or the start fails.
  const listenersAtDefault = { mqtt: r.optional('SVC_MQTT_ADDR') === undefined, coap: r.optional('SVC_COAP_ADDR') === undefined };

  const publicBaseUrl = r.url('SVC_PUBLIC_BASE_URL', r.optional('SVC_URL') ?? 'http://localhost:8080') as string;

  const database = {
    url: r.url('DATABASE_URL', undefined, true),
    poolMax: r.int('SVC_DB_POOL_MAX', 10, 1, 1000),
    connectTimeoutSecs: r.int('SVC_DB_CONNECT_TIMEOUT_SECS', 10, 1, 600),
    idleTimeoutSecs: r.int('SVC_DB_IDLE_TIMEOUT_SECS', 60, 0, 86400),
    maxLifetimeSecs: r.int('SVC_DB_MAX_LIFETIME_SECS', 1800, 0, 86400),
    embedded: {
      dataDir: path.resolve(cwd, r.string('SVC_DATA_DIR', '.data')),
      port: r.int('SVC_EMBEDDED_PG_PORT', 54329, 1, 65535),
    },
  };

  // What one caller can make the service store and answer (issue 32): every JSON document a caller stores
  // (attributes, schemas, mappings, conditions) is bounded in bytes and nesting; one answer (GraphQL, a
  // custom endpoint, a reader page) is bounded in bytes, counted as it is produced. With the defaults, a
  // page of 100 documents is read in one step of about 20 ms, and the most documents a query's cost admits
  // (10,000 / 10) fill about the answer cap (docs/configuration.md).
  const documents = {
    maxBytes: r.int('SVC_JSON_DOCUMENT_MAX_BYTES', 16_384, 256, 16_777_216),
    maxDepth: r.int('SVC_JSON_DOCUMENT_MAX_DEPTH', 32, 1, 1000),
  };
  const answerMaxBytes = r.int('SVC_ANSWER_MAX_BYTES', 16_777_216, 1024, 1_073_741_824);
  if (answerMaxBytes < documents.maxBytes) r.problem('SVC_ANSWER_MAX_BYTES must be at least SVC_JSON_DOCUMENT_MAX_BYTES (a stored document must fit in an answer)');

  const graphql = {
    introspection: r.bool('SVC_GRAPHQL_INTROSPECTION_ENABLED', false),
    maxDepth: r.int('SVC_GRAPHQL_MAX_DEPTH', 20, 1, 1000),
    // Cost: 1 per field, a JSON-typed field jsonFieldCost, and a page of a list counts its items (limit ×
    // selection; src/graphql/cost.ts). The admin UI's largest operation costs about 3,900 at 100-item pages.
    maxComplexity: r.int('SVC_GRAPHQL_MAX_COMPLEXITY', 10_000, 1, 1_000_000),
    jsonFieldCost: r.int('SVC_GRAPHQL_JSON_FIELD_COST', 10, 1, 100_000),
    answerMaxBytes,
    // Checked before any validation rule expands a fragment (src/graphql/limits.ts): each bound caps the
    // work a document can ask of the check itself.
    maxTokens: r.int('SVC_GRAPHQL_MAX_TOKENS', 10_000, 100, 1_000_000),
    maxNesting: r.int('SVC_GRAPHQL_MAX_NESTING', 64, 8, 1000),
    maxFragments: r.int('SVC_GRAPHQL_MAX_FRAGMENTS', 100, 0, 10_000),
    maxAliases: r.int('SVC_GRAPHQL_MAX_ALIASES', 100, 0, 10_000),
    bodyLimitBytes: r.int('SVC_GRAPHQL_BODY_LIMIT_BYTES', 1_048_576, 1024),
    compiledQueryCacheSize: r.int('SVC_GRAPHQL_QUERY_CACHE_SIZE', 1000, 1, 1_000_000),
  };

  const lists = {
    defaultLimit: r.int('SVC_LIST_DEFAULT_LIMIT', 20, 1, 10_000),
    maxLimit: r.int('SVC_LIST_MAX_LIMIT', 100, 1, 10_000),
    dbConnections: r.int('SVC_LIST_DB_CONNECTIONS', 4, 1, 256),
  };
  if (lists.defaultLimit > lists.maxLimit) r.problem('SVC_LIST_DEFAULT_LIMIT must not exceed SVC_LIST_MAX_LIMIT');

  const rateLimitWindow = (name: string) => r.int(`SVC_HTTP_RATE_LIMIT_${name}_WINDOW_SECS`, 60, 1, 86400);
  const rateLimits = {
    enabled: r.bool('SVC_RATE_LIMIT_ENABLED', true),
    ipv6PrefixLen: r.int('SVC_HTTP_RATE_LIMIT_IPV6_PREFIX_LEN', 64, 1, 128),
    trustedProxyCidrs: r.list('SVC_TRUSTED_PROXY_CIDRS'),
    policies: {
      auth_routes: { max: r.int('SVC_HTTP_RATE_LIMIT_AUTH_ROUTES', 30, 1), windowSecs: rateLimitWindow('AUTH_ROUTES') },
      public_routes: { max: r.int('SVC_HTTP_RATE_LIMIT_PUBLIC_ROUTES', 120, 1), windowSecs: rateLimitWindow('PUBLIC_ROUTES') },
      // Backends behind one address call GraphQL and custom endpoints hard: generous by default.
      graphql: { max: r.int('SVC_HTTP_RATE_LIMIT_GRAPHQL', 6000, 1), windowSecs: rateLimitWindow('GRAPHQL') },
      custom_endpoints: { max: r.int('SVC_HTTP_RATE_LIMIT_CUSTOM_ENDPOINTS', 6000, 1), windowSecs: rateLimitWindow('CUSTOM_ENDPOINTS') },
      admin_routes: { max: r.int('SVC_HTTP_RATE_LIMIT_ADMIN_ROUTES', 300, 1), windowSecs: rateLimitWindow('ADMIN_ROUTES') },
      enrollment: { max: r.int('SVC_HTTP_RATE_LIMIT_ENROLLMENT', 1000, 1), windowSecs: rateLimitWindow('ENROLLMENT') },
    },
  };

  const keyEncryptionKey = r.key('SVC_KEY_ENCRYPTION_KEY', 32);
  const auth = {
    adminIdentifier: r.string('SVC_ADMIN_IDENTIFIER', 'admin'),
    adminSecret: r.secret('SVC_ADMIN_SECRET') ?? r.secret('ADMIN_SECRET'),
    keyEncryptionKey,
    jwtExpirySecs: r.int('SVC_JWT_EXPIRY_SECS', 3600, 60, 31_536_000),
    jwtIssuer: r.string('SVC_JWT_ISSUER', publicBaseUrl),
    jwtAudience: r.string('SVC_JWT_AUDIENCE', 'magistrala'),
    minPasswordChars: r.int('SVC_MIN_PASSWORD_CHARS', 12, 8, 1024),
    scrypt: {
      cost: r.int('SVC_SCRYPT_COST', 16384, 1024, 1 << 22),
      blockSize: r.int('SVC_SCRYPT_BLOCK_SIZE', 8, 1, 64),
      parallelization: r.int('SVC_SCRYPT_PARALLELIZATION', 1, 1, 16),
    },
    loginFailureLimit: r.int('SVC_LOGIN_FAILURE_LIMIT', 5, 1, 1000),
    loginFailureWindowSecs: r.int('SVC_LOGIN_FAILURE_WINDOW_SECS', 900, 1, 86400),
    selfRegistrationEnabled: r.bool('SVC_SELF_REGISTRATION_ENABLED', true),
    emailVerificationRequired: r.bool('SVC_EMAIL_VERIFICATION_REQUIRED', false),
    invitationExpirySecs: r.int('SVC_INVITATION_EXPIRY_SECS', 604_800, 60),
    bodyLimitBytes: r.int('SVC_AUTH_BODY_LIMIT_BYTES', 32_768, 1024),
  };
  if (auth.scrypt.cost & (auth.scrypt.cost - 1)) r.problem('SVC_SCRYPT_COST must be a power of two');
  // scrypt itself refuses N >= 2^(16·r), and each hash holds 128·N·r bytes: refused here, not at the first login.
  if (Math.log2(auth.scrypt.cost) >= 16 * auth.scrypt.blockSize) {
    r.problem(`SVC_SCRYPT_COST must be below 2^${16 * auth.scrypt.blockSize} when SVC_SCRYPT_BLOCK_SIZE is ${auth.scrypt.blockSize}`);
  }
  if (128 * auth.scrypt.cost * auth.scrypt.blockSize > 2 ** 30) {
    r.problem('SVC_SCRYPT_COST × SVC_SCRYPT_BLOCK_SIZE × 128 bytes (the memory of one hash) must be at most 1 GiB');
  }

  // Authentication runtime settings (issue 4): bootstrap subject, login limits per address, caches, origins.
  const authRuntime = {
    adminEntityId: r.string('SVC_ADMIN_ENTITY_ID', r.optional('ADMIN_ENTITY_ID') ?? '00000000-0000-0000-0000-000000000001'),
    allowUnverifiedEmailLogin: r.bool('SVC_ALLOW_UNVERIFIED_EMAIL_LOGIN', false),
    // A NAT of many users shares one address: its ceiling counts failures of every identity there and
    // only holds attempts back (src/auth/login-throttle.ts); one identity's guesses are refused per
    // address and held back overall.
    loginFailureIpLimit: r.int('SVC_LOGIN_FAILURE_IP_LIMIT', 1000, 1, 1_000_000),
    loginIdentifierFailureLimit: r.int('SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT', 20, 1, 1_000_000),
    // Identity-wide and address-wide limits hold attempts back, never refuse them: this is the longest hold.
    loginFailureMaxDelaySecs: r.int('SVC_LOGIN_FAILURE_MAX_DELAY_SECS', 10, 0, 60),
    // Failed-login counters kept in PostgreSQL; past it the sweep drops those with the fewest failures.
    loginFailureMaxKeys: r.int('SVC_LOGIN_FAILURE_MAX_KEYS', 200_000, 1000, 100_000_000),
    tokenCacheSize: r.int('SVC_AUTH_TOKEN_CACHE_SIZE', 10_000, 1, 10_000_000),
    tokenCacheTtlSecs: r.int('SVC_AUTH_TOKEN_CACHE_TTL_SECS', 300, 1, 86_400),
    deviceKeyCacheSize: r.int('SVC_DEVICE_KEY_CACHE_SIZE', 100_000, 1, 10_000_000),
    // Tenants by id and alias for the runtime credential check (gRPC AuthenticateCredential).
    tenantCacheSize: r.int('SVC_AUTH_TENANT_CACHE_SIZE', 10_000, 1, 10_000_000),
    trustedOrigins: r.list('SVC_TRUSTED_ORIGINS'),
  };
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(authRuntime.adminEntityId)) {
    r.problem('SVC_ADMIN_ENTITY_ID must be a UUID');
  }
  for (const origin of authRuntime.trustedOrigins) {
    if (!URL.canParse(origin)) r.problem(`SVC_TRUSTED_ORIGINS entries must be URLs, got '${origin}'`);
  }
  if (auth.adminSecret !== undefined && [...auth.adminSecret].length < auth.minPasswordChars) {
    r.problem(`SVC_ADMIN_SECRET must be at least ${auth.minPasswordChars} characters (SVC_MIN_PASSWORD_CHARS)`);
  }

  const pki = loadPkiConfig(r, keyEncryptionKey, { embeddedDatabase: r.optional('DATABASE_URL') === undefined, dataDir: database.embedded.dataDir });

  const workers = {
    threads: r.int('SVC_WORKER_THREADS', Math.max(1, Math.min(4, os.availableParallelism() - 1)), 1, 256),
    maxQueue: r.int('SVC_WORKER_MAX_QUEUE', 1024, 1, 1_000_000),
  };

  const audit = {
    batchSize: r.int('SVC_AUDIT_BATCH_SIZE', 500, 1, 100_000),
    flushIntervalMs: r.int('SVC_AUDIT_FLUSH_INTERVAL_MS', 200, 1, 60_000),
    maxQueue: r.int('SVC_AUDIT_MAX_QUEUE', 50_000, 1, 10_000_000),
    // Deleting old entries is opt-in (the log was kept whole before it existed); the numbers are shown either way.
    retention: {
      enabled: r.bool('SVC_AUDIT_RETENTION_ENABLED', false),
      days: r.int('SVC_AUDIT_RETENTION_DAYS', 365, 1, 36_500),
      // setInterval's ceiling is 2^31 - 1 ms.
      cleanupIntervalSecs: r.int('SVC_AUDIT_CLEANUP_INTERVAL_SECS', 86_400, 1, 2_147_483),
      cleanupBatchSize: r.int('SVC_AUDIT_CLEANUP_BATCH_SIZE', 5000, 1, 100_000),
    },
  };

  const customEndpoints = {
    bodyLimitBytes: r.int('SVC_CUSTOM_ENDPOINT_BODY_LIMIT_BYTES', 1_048_576, 1024),
    timeoutMs: r.int('SVC_CUSTOM_ENDPOINT_TIMEOUT_MS', 5000, 1, 600_000),
    // Each summary of an execution record (request, response) is kept whole up to this size, else cut.
    logSummaryMaxBytes: r.int('SVC_CUSTOM_ENDPOINT_LOG_SUMMARY_MAX_BYTES', 16_384, 256, 1_048_576),
    // Execution records kept: per endpoint the newest maxPerEndpoint, none older than days; one instance
    // trims them every intervalSecs, batchSize rows per statement.
    retention: {
      days: r.int('SVC_CUSTOM_ENDPOINT_EXECUTION_RETENTION_DAYS', 30, 1, 36_500),
      maxPerEndpoint: r.int('SVC_CUSTOM_ENDPOINT_EXECUTION_MAX_PER_ENDPOINT', 10_000, 1, 100_000_000),
      intervalSecs: r.int('SVC_CUSTOM_ENDPOINT_EXECUTION_RETENTION_INTERVAL_SECS', 300, 1, 86_400),
      batchSize: r.int('SVC_CUSTOM_ENDPOINT_EXECUTION_RETENTION_BATCH_SIZE', 5000, 1, 1_000_000),
    },
    answerMaxBytes,
  };

  // Authorization engine (issue 3): decision cache bounds, cross-instance staleness cap, check audit.
  const authz = {
    cacheSubjects: r.int('SVC_AUTHZ_CACHE_SUBJECTS', 50_000, 1, 10_000_000),
    cacheObjects: r.int('SVC_AUTHZ_CACHE_OBJECTS', 200_000, 1, 10_000_000),
    cacheDecisions: r.int('SVC_AUTHZ_CACHE_DECISIONS', 500_000, 1, 100_000_000),
    cacheMaxBytes: r.int('SVC_AUTHZ_CACHE_MAX_BYTES', 256 * 1024 * 1024, 1024 * 1024),
    cacheTtlSecs: r.int('SVC_AUTHZ_CACHE_TTL_SECS', 60, 1, 86_400),
    auditAllowed: r.oneOf('SVC_AUTHZ_AUDIT_ALLOWED', ['summary', 'all'] as const, 'summary'),
    auditSummarySecs: r.int('SVC_AUTHZ_AUDIT_SUMMARY_SECS', 60, 1, 86_400),
    bodyLimitBytes: r.int('SVC_AUTHZ_BODY_LIMIT_BYTES', 65_536, 1024, 16_777_216),
    dbConnections: r.int('SVC_AUTHZ_DB_CONNECTIONS', 4, 1, 256),
  };

  // Device messaging (issue 7): publish size, group commit, reader paging, live sockets, partitions.
  const messaging = {
    maxMessageBytes: r.int('SVC_MESSAGING_MAX_MESSAGE_BYTES', 262_144, 64, 16_777_216),
    maxRecords: r.int('SVC_MESSAGING_MAX_RECORDS', 1000, 1, 1_000_000),
    writer: {
      batchSize: r.int('SVC_MESSAGING_BATCH_SIZE', 2000, 1, 100_000),
      batchWaitMs: r.int('SVC_MESSAGING_BATCH_WAIT_MS', 5, 0, 10_000),
      connections: r.int('SVC_MESSAGING_WRITER_CONNECTIONS', 1, 1, 64),
      maxQueue: r.int('SVC_MESSAGING_MAX_QUEUE', 50_000, 1, 10_000_000),
      writeTimeoutMs: r.int('SVC_MESSAGING_WRITE_TIMEOUT_MS', 5000, 10, 600_000),
    },
    reader: {
      defaultLimit: r.int('SVC_READER_DEFAULT_LIMIT', 10, 1, 100_000),
      maxLimit: r.int('SVC_READER_MAX_LIMIT', 1000, 1, 100_000),
      connections: r.int('SVC_READER_DB_CONNECTIONS', 4, 1, 256),
      // A filtered total counts every matching row and a deep offset walks past every skipped one: a
      // reader's own query is bounded, so one caller cannot hold the reader's connections for minutes.
      statementTimeoutMs: r.int('SVC_READER_STATEMENT_TIMEOUT_MS', 10_000, 0, 3_600_000),
      answerMaxBytes,
    },
    live: {
      maxBackpressureBytes: r.int('SVC_MESSAGING_WS_MAX_BACKPRESSURE_BYTES', 1_048_576, 1024, 1 << 30),
      idleTimeoutSecs: r.int('SVC_MESSAGING_WS_IDLE_TIMEOUT_SECS', 120, 8, 960),
      revalidateSecs: r.int('SVC_MESSAGING_WS_REVALIDATE_SECS', 60, 0, 86_400),
    },
    partitions: {
      aheadDays: r.int('SVC_MESSAGES_PARTITIONS_AHEAD_DAYS', 7, 1, 366),
      // 0 keeps messages forever; otherwise whole days older than this are dropped.
      retentionDays: r.int('SVC_MESSAGES_RETENTION_DAYS', 0, 0, 36_500),
      intervalSecs: r.int('SVC_MESSAGES_MAINTENANCE_INTERVAL_SECS', 3600, 1, 86_400),
    },
  };
  if (messaging.reader.defaultLimit > messaging.reader.maxLimit) r.problem('SVC_READER_DEFAULT_LIMIT must not exceed SVC_READER_MAX_LIMIT');
  if (answerMaxBytes < messaging.maxMessageBytes) r.problem('SVC_ANSWER_MAX_BYTES must be at least SVC_MESSAGING_MAX_MESSAGE_BYTES (a stored message must fit in a reader page)');

  // MQTT broker, CoAP ingest, broker admin and the cluster node registry (issue 7).
  const broker = {
    redisUrl: r.url('SVC_REDIS_URL', undefined, true),
    redisKeyPrefix: r.string('SVC_REDIS_KEY_PREFIX', 'svc:mqtt:'),
    mqttDenyAction: r.oneOf('SVC_MQTT_DENY_ACTION', ['ignore', 'disconnect'] as const, 'ignore'),
    mqttRevalidateSecs: r.int('SVC_MQTT_REVALIDATE_SECS', 60, 0, 86_400),
    // MQTT lets a packet declare up to 256 MiB, and the parser holds what arrives of it, before CONNECT
    // too. A publish carries at most one message plus its topic and properties: larger frames are cut
    // off at their fixed header. Default: the message limit plus 4 KiB.
    mqttMaxPacketBytes: r.int('SVC_MQTT_MAX_PACKET_BYTES', messaging.maxMessageBytes + 4096, 1024, 268_435_460),
    mqttMaxSubscriptions: r.int('SVC_MQTT_MAX_SUBSCRIPTIONS', 100, 1, 100_000),
    mqttTls: {
      certPath: r.optional('SVC_MQTT_TLS_CERT_PATH'),
      keyPath: r.optional('SVC_MQTT_TLS_KEY_PATH'),
      /** Set: clients must also present a certificate this CA signed (mutual TLS), besides their key. */
      clientCaPath: r.optional('SVC_MQTT_TLS_CLIENT_CA_PATH'),
    },
    // Unfinished CoAP block-wise uploads are held before anyone is authenticated: a bound on them all.
    coapMaxBlockBytesHeld: r.int('SVC_COAP_MAX_BLOCK_BYTES_HELD', 16_777_216, 1024, 1 << 30),
    // An upload whose next block does not come within this lets its room go (a client retransmits a lost
    // block after 2-3 s, then 4-6 s: 15 s outlasts two losses; EXCHANGE_LIFETIME, 247 s, is the most).
    coapBlockTimeoutSecs: r.int('SVC_COAP_BLOCK_TIMEOUT_SECS', 15, 1, 247),
    // CoAP observations (subscriptions) are held in memory per instance: bounded overall and per device.
    coapMaxObservations: r.int('SVC_COAP_MAX_OBSERVATIONS', 10_000, 1, 1_000_000),
    coapMaxObservationsPerDevice: r.int('SVC_COAP_MAX_OBSERVATIONS_PER_DEVICE', 16, 1, 100_000),
    coapRevalidateSecs: r.int('SVC_COAP_REVALIDATE_SECS', 60, 0, 86_400),
    // The coap package keeps every answer for EXCHANGE_LIFETIME (247 s) to answer retransmissions, bounded
    // by the answers' encoded bytes (32 MiB by default); each entry holds ~5 KB of heap for its ~15-100
    // bytes, so a datagram flood grew the heap by GBs before this bound (test/proof/fuzz/listeners.test.ts).
    coapResponseCacheBytes: r.int('SVC_COAP_RESPONSE_CACHE_BYTES', 65_536, 1024, 1 << 30),
    adminToken: r.secret('SVC_BROKER_ADMIN_TOKEN'),
    nodeAddress: r.optional('SVC_NODE_ADDRESS'),
    nodeHeartbeatMs: r.int('SVC_NODE_HEARTBEAT_MS', 5000, 100, 600_000),
    nodeStaleMs: r.int('SVC_NODE_STALE_MS', 15_000, 300, 3_600_000),
    nodePruneSecs: r.int('SVC_NODE_PRUNE_SECS', 3600, 1, 31_536_000),
  };
  if (broker.coapMaxBlockBytesHeld < messaging.maxMessageBytes) {
    r.problem('SVC_COAP_MAX_BLOCK_BYTES_HELD must be at least SVC_MESSAGING_MAX_MESSAGE_BYTES (each unfinished upload reserves a whole message)');
  }
  if (!broker.mqttTls.certPath !== !broker.mqttTls.keyPath) r.problem('SVC_MQTT_TLS_CERT_PATH and SVC_MQTT_TLS_KEY_PATH must be set together');
  if (broker.mqttTls.clientCaPath && !broker.mqttTls.certPath) r.problem('SVC_MQTT_TLS_CLIENT_CA_PATH needs SVC_MQTT_TLS_CERT_PATH and SVC_MQTT_TLS_KEY_PATH');
  if (broker.nodeStaleMs <= broker.nodeHeartbeatMs) r.problem('SVC_NODE_STALE_MS must exceed SVC_NODE_HEARTBEAT_MS');
  if (broker.redisUrl && !/^rediss?:$/.test(new URL(broker.redisUrl).protocol)) r.problem('SVC_REDIS_URL must be a redis:// or rediss:// URL');

  // gRPC runtime listener (issues 3, 28): plaintext unless a certificate and key are given; a client CA adds
  // mTLS. A message over the size limit is refused with RESOURCE_EXHAUSTED before it is decoded; keepalive
  // pings find dead peers (a protocol adapter holds one channel for hours); the stream cap bounds the
  // calls one connection may have in flight.
  const grpc = {
    tlsCertPath: r.optional('SVC_GRPC_TLS_CERT_PATH'),
    tlsKeyPath: r.optional('SVC_GRPC_TLS_KEY_PATH'),
    clientCaPath: r.optional('SVC_GRPC_TLS_CLIENT_CA_PATH'),
    maxMessageBytes: r.int('SVC_GRPC_MAX_MESSAGE_BYTES', 65_536, 1024, 16_777_216),
    keepaliveTimeMs: r.int('SVC_GRPC_KEEPALIVE_TIME_MS', 7_200_000, 1000, 86_400_000),
    keepaliveTimeoutMs: r.int('SVC_GRPC_KEEPALIVE_TIMEOUT_MS', 20_000, 100, 3_600_000),
    maxConcurrentStreams: r.int('SVC_GRPC_MAX_CONCURRENT_STREAMS', 1000, 1, 2_147_483_647),
    // CertificateService.ResolveCertificateV2 answers (dropped on revocation on every instance; the TTL bounds
    // what no revocation announces).
    certificateCache: {
      max: r.int('SVC_GRPC_CERT_CACHE_SIZE', 10_000, 1, 10_000_000),
      ttlSecs: r.int('SVC_GRPC_CERT_CACHE_TTL_SECS', 300, 1, 86_400),
    },
  };
  if (!grpc.tlsCertPath !== !grpc.tlsKeyPath) r.problem('SVC_GRPC_TLS_CERT_PATH and SVC_GRPC_TLS_KEY_PATH must be set together');
  if (grpc.clientCaPath && !grpc.tlsCertPath) r.problem('SVC_GRPC_TLS_CLIENT_CA_PATH needs SVC_GRPC_TLS_CERT_PATH and SVC_GRPC_TLS_KEY_PATH');

  const config = {
    env: r.oneOf('NODE_ENV', ['development', 'production', 'test'] as const, 'development'),
    logLevel: r.oneOf('SVC_LOG_LEVEL', LOG_LEVELS, 'info'),
    // The build's source revision, shown to platform administrators by systemStatus (unset: null).
    revision: r.optional('SVC_REVISION') ?? null,
    publicBaseUrl,
    listeners,
    listenersAtDefault,
    database,
    graphql,
    lists,
    documents,
    rateLimits,
    auth,
    authRuntime,
    pki,
    workers,
    audit,
    customEndpoints,
    authz,
    grpc,
    messaging,
    broker,
    metricsEnabled: r.bool('SVC_METRICS_ENABLED', true),
    // Unset: /metrics is served on the management listener; set: only on this address.
    metricsAddr: r.optional('SVC_METRICS_ADDR') === undefined ? null : r.addr('SVC_METRICS_ADDR', 'off'),
    shutdownTimeoutSecs: r.int('SVC_SHUTDOWN_TIMEOUT_SECS', 15, 1, 3600),
    // How long a deleted tenant can still be restored (purge is allowed at any time).
    tenantRetentionSecs: r.int('SVC_TENANT_RETENTION_DAYS', 30, 0, 3650) * 86_400,
    secretNames: r.secrets,
  };

  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return config;
}

/** Where the development CA's files live (src/pki/dev-ca.ts writes them; `npm run ca:init` too). */
export function devCaFiles(dir: string) {
  const f = (name: string) => path.join(dir, name);
  return {
    dir,
    rootCert: f('root-ca.pem'),
    // Written for the operator (to sign a replacement intermediate, or to throw away); the service never reads it.
    rootKey: f('root-ca.key'),
    intermediateCert: f('platform-intermediate.pem'),
    intermediateKey: f('platform-intermediate.key'),
    // The enrollment listener's certificate (localhost, 127.0.0.1, ::1) followed by the intermediate.
    serverCert: f('enrollment-server.pem'),
    serverKey: f('enrollment-server.key'),
    // Seals the imported intermediate's key when SVC_PKI_CA_KEY_ENCRYPTION_KEY is unset (base64 of 32 bytes).
    keyEncryptionKey: f('ca-key-encryption.key'),
  };
}

export type DevCaFiles = ReturnType<typeof devCaFiles>;

/**
 * The development CA (issue 34): on the embedded database (the quick start) with no root configured, the
 * first start makes a root, a platform intermediate and an enrollment server certificate under
 * SVC_DATA_DIR/pki and the service runs on them as if configured, enrollment included (on loopback).
 * With DATABASE_URL set it applies only when asked (SVC_PKI_DEV_CA=on); a configured root always wins.
 */
function loadDevCa(r: ReturnType<typeof createReader>, database: { embeddedDatabase: boolean; dataDir: string }) {
  const mode = r.oneOf('SVC_PKI_DEV_CA', ['auto', 'on', 'off'] as const, 'auto');
  const rootConfigured = r.optional('SVC_PKI_ROOT_CERT_PATH') !== undefined;
  const active = !rootConfigured && (mode === 'on' || (mode === 'auto' && database.embeddedDatabase));
  return { mode, active, files: devCaFiles(path.join(database.dataDir, 'pki')) };
}

function loadPkiConfig(
  r: ReturnType<typeof createReader>, kek: Buffer | undefined, database: { embeddedDatabase: boolean; dataDir: string },
) {
  const devCa = loadDevCa(r, database);
  const dev = devCa.active ? devCa.files : undefined;
  const enrollmentEnabled = r.bool('SVC_PKI_ENROLLMENT_ENABLED', devCa.active);
  const backend = r.oneOf('SVC_PKI_CA_KEY_BACKEND', ['encrypted_database', 'pkcs11'] as const, 'encrypted_database');
  const caKek = r.key('SVC_PKI_CA_KEY_ENCRYPTION_KEY', 32);
  if (caKek && kek && caKek.equals(kek)) {
    r.problem('SVC_PKI_CA_KEY_ENCRYPTION_KEY must differ from SVC_KEY_ENCRYPTION_KEY');
  }
  const pkcs11 = {
    modulePath: r.optional('SVC_PKI_PKCS11_MODULE_PATH'),
    tokenLabel: r.optional('SVC_PKI_PKCS11_TOKEN_LABEL'),
    userPin: r.secret('SVC_PKI_PKCS11_USER_PIN'),
    operationTimeoutMs: r.int('SVC_PKI_PKCS11_OPERATION_TIMEOUT_MS', 2000, 1, 600_000),
    maxRetries: r.int('SVC_PKI_PKCS11_MAX_RETRIES', 1, 0, 100),
    maxInFlight: r.int('SVC_PKI_PKCS11_MAX_IN_FLIGHT', 8, 1, 10_000),
    circuitFailureThreshold: r.int('SVC_PKI_PKCS11_CIRCUIT_FAILURE_THRESHOLD', 3, 1, 10_000),
    circuitResetSecs: r.int('SVC_PKI_PKCS11_CIRCUIT_RESET_SECS', 30, 1, 86400),
  };
  if (backend === 'pkcs11') {
    for (const [name, value] of [
      ['SVC_PKI_PKCS11_MODULE_PATH', pkcs11.modulePath],
      ['SVC_PKI_PKCS11_TOKEN_LABEL', pkcs11.tokenLabel],
      ['SVC_PKI_PKCS11_USER_PIN', pkcs11.userPin],
    ] as const) {
      if (!value) r.problem(`${name} is required when SVC_PKI_CA_KEY_BACKEND=pkcs11`);
    }
  }
  const enrollment = {
    enabled: enrollmentEnabled,
    // On the development CA: loopback only, with the server certificate it made.
    listen: r.addr('SVC_PKI_ENROLLMENT_LISTEN_ADDR', dev ? '127.0.0.1:8443' : '0.0.0.0:8443'),
    tlsCertPath: r.optional('SVC_PKI_ENROLLMENT_TLS_CERT_PATH') ?? dev?.serverCert,
    tlsKeyPath: r.optional('SVC_PKI_ENROLLMENT_TLS_KEY_PATH') ?? dev?.serverKey,
    maxCsrBytes: r.int('SVC_PKI_ENROLLMENT_MAX_CSR_BYTES', 65_536, 128, 10_485_760),
    entityRateLimit: r.int('SVC_PKI_ENROLLMENT_ENTITY_RATE_LIMIT', 10, 1),
    entityRateWindowSecs: r.int('SVC_PKI_ENROLLMENT_ENTITY_RATE_WINDOW_SECS', 60, 1),
    tenantRateLimit: r.int('SVC_PKI_ENROLLMENT_TENANT_RATE_LIMIT', 1000, 1),
    tenantRateWindowSecs: r.int('SVC_PKI_ENROLLMENT_TENANT_RATE_WINDOW_SECS', 60, 1),
    maxConnections: r.int('SVC_PKI_ENROLLMENT_MAX_CONNECTIONS', 256, 1),
    maxConnectionsPerIp: r.int('SVC_PKI_ENROLLMENT_MAX_CONNECTIONS_PER_IP', 8, 1),
    ipv6PrefixLen: r.int('SVC_PKI_ENROLLMENT_IPV6_PREFIX_LEN', 64, 1, 128),
    headerTimeoutSecs: r.int('SVC_PKI_ENROLLMENT_HTTP_HEADER_TIMEOUT_SECS', 10, 1),
    requestTimeoutSecs: r.int('SVC_PKI_ENROLLMENT_HTTP_REQUEST_TIMEOUT_SECS', 30, 1),
    keepAlive: r.bool('SVC_PKI_ENROLLMENT_HTTP_KEEP_ALIVE', false),
    handshakeTimeoutSecs: r.int('SVC_PKI_ENROLLMENT_HANDSHAKE_TIMEOUT_SECS', 10, 1),
    connectionTimeoutSecs: r.int('SVC_PKI_ENROLLMENT_CONNECTION_TIMEOUT_SECS', 60, 1),
    shutdownDrainTimeoutSecs: r.int('SVC_PKI_ENROLLMENT_SHUTDOWN_DRAIN_TIMEOUT_SECS', 10, 0),
  };
  if (enrollment.enabled) {
    if (!enrollment.tlsCertPath) r.problem('SVC_PKI_ENROLLMENT_TLS_CERT_PATH is required when enrollment is enabled');
    if (!enrollment.tlsKeyPath) r.problem('SVC_PKI_ENROLLMENT_TLS_KEY_PATH is required when enrollment is enabled');
  }
  const rootCertPath = r.optional('SVC_PKI_ROOT_CERT_PATH') ?? dev?.rootCert;
  const platformIntermediateCertPath = r.optional('SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH') ?? dev?.intermediateCert;
  const platformIntermediateKeyPath = r.optional('SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH') ?? dev?.intermediateKey;
  if (dev && r.optional('SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH')) {
    r.problem('SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH needs SVC_PKI_ROOT_CERT_PATH (the root it chains to); the development CA brings its own');
  }
  if (!platformIntermediateCertPath !== !platformIntermediateKeyPath) {
    r.problem('SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH and SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH must be set together');
  }
  if (platformIntermediateCertPath && !rootCertPath) r.problem('SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH needs SVC_PKI_ROOT_CERT_PATH (the root it chains to)');
  return {
    publicationBaseUrl: publicationBaseUrlOf(r),
    rootCertPath,
    platformIntermediateCertPath,
    platformIntermediateKeyPath,
    // Authorities the service makes itself (platform leaf issuer, tenant intermediates): key type and lifetime
    // (capped by the platform intermediate's own notAfter).
    authorityKeyAlgorithm: r.oneOf('SVC_PKI_AUTHORITY_KEY_ALGORITHM', ['ecdsa-p256', 'ecdsa-p384', 'rsa-2048', 'rsa-3072', 'rsa-4096', 'ed25519'] as const, 'ecdsa-p256'),
    authorityTtlSecs: r.int('SVC_PKI_AUTHORITY_TTL_SECS', 94_608_000, 3600, 946_080_000),
    caKeyBackend: backend,
    caKeyEncryptionKey: caKek,
    // The development CA's own key-encryption key (a file next to its keys) has an id of its own, so a start
    // with an operator's key later is refused by name rather than failing to unwrap.
    caKeyEncryptionKeyId: r.string('SVC_PKI_CA_KEY_ENCRYPTION_KEY_ID', dev && !caKek ? 'dev-ca:v1' : 'local-ca:v1'),
    pkcs11,
    devCa,
    enrollment,
    lifecycle: {
      enabled: r.bool('SVC_PKI_LIFECYCLE_ENABLED', false),
      intervalSecs: r.int('SVC_PKI_LIFECYCLE_INTERVAL_SECS', 60, 1),
      batchSize: r.int('SVC_PKI_LIFECYCLE_BATCH_SIZE', 250, 1),
      expiryWarningSecs: r.int('SVC_PKI_EXPIRY_WARNING_SECS', 86_400, 0),
      authorityWarningSecs: r.int('SVC_PKI_AUTHORITY_WARNING_SECS', 2_592_000, 0),
    },
    generatedKeyIssuanceEnabled: r.bool('SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED', false),
    // SPEC.md: leaves are clientAuth only. On, profiles may add server_auth and the others (a platform decision).
    profileExtendedKeyUsagesEnabled: r.bool('SVC_PKI_PROFILE_EXTENDED_KEY_USAGES_ENABLED', false),
    // Revocation publication (/certs): how long a CRL and an OCSP answer hold (nextUpdate - thisUpdate).
    publication: {
      crlValiditySecs: r.int('SVC_PKI_CRL_VALIDITY_SECS', 86_400, 300, 31_536_000),
      ocspValiditySecs: r.int('SVC_PKI_OCSP_VALIDITY_SECS', 3600, 60, 604_800),
      // The publication listener (SVC_PKI_PUBLICATION_ADDR) on a thread of its own: answers without a nonce
      // cost less, nonce answers more (a round trip to the main thread); publication-thread.ts.
      listenerThread: r.bool('SVC_PKI_PUBLICATION_THREAD', false),
    },
    outbox: loadOutboxConfig(r),
  };
}

/**
 * SVC_PKI_PUBLICATION_BASE_URL: the base of the OCSP, caIssuers and CRL URLs embedded in certificates, read at
 * issuance. Unset (null): the publication listener's own address once bound. Apart from SVC_PUBLIC_BASE_URL
 * (JWT issuer, cookie origin, links), so moving one never moves the other.
 */
function publicationBaseUrlOf(r: ReturnType<typeof createReader>): string | null {
  const value = r.url('SVC_PKI_PUBLICATION_BASE_URL', undefined);
  if (value === undefined) return null;
  const u = new URL(value);
  // Relying parties fetch CRLs and OCSP over plain http (RFC 5280 4.2.1.13; `openssl verify -crl_download`
  // knows nothing else); https is allowed for clients that can, nothing else is a location.
  if (u.protocol !== 'http:' && u.protocol !== 'https:') r.problem(`SVC_PKI_PUBLICATION_BASE_URL must be an http or https URL, got '${value}'`);
  else if (u.search || u.hash || u.username || u.password) r.problem(`SVC_PKI_PUBLICATION_BASE_URL must be a base without query, fragment or credentials, got '${value}'`);
  return value.replace(/\/+$/, '');
}

/** The outbox relay's sinks (issue 27): a signed webhook and/or a NOTIFY channel; no sink, no relay. */
function loadOutboxConfig(r: ReturnType<typeof createReader>) {
  const webhookUrl = r.url('SVC_PKI_OUTBOX_WEBHOOK_URL', undefined, true);
  const webhookSecret = r.secret('SVC_PKI_OUTBOX_WEBHOOK_SECRET');
  if (webhookUrl && !/^https?:/.test(webhookUrl)) r.problem('SVC_PKI_OUTBOX_WEBHOOK_URL must be an http or https URL');
  if (webhookUrl && !webhookSecret) r.problem('SVC_PKI_OUTBOX_WEBHOOK_SECRET is required with SVC_PKI_OUTBOX_WEBHOOK_URL (it signs each delivery)');
  const notifyChannel = r.optional('SVC_PKI_OUTBOX_NOTIFY_CHANNEL');
  if (notifyChannel && !/^[a-z_][a-z0-9_]{0,62}$/.test(notifyChannel)) {
    r.problem('SVC_PKI_OUTBOX_NOTIFY_CHANNEL must be a lowercase PostgreSQL identifier (letters, digits, _; at most 63)');
  }
  return {
    webhookUrl,
    webhookSecret,
    webhookTimeoutMs: r.int('SVC_PKI_OUTBOX_WEBHOOK_TIMEOUT_MS', 5000, 100, 120_000),
    notifyChannel,
    pollIntervalMs: r.int('SVC_PKI_OUTBOX_POLL_INTERVAL_MS', 1000, 50, 3_600_000),
    batchSize: r.int('SVC_PKI_OUTBOX_BATCH_SIZE', 100, 1, 10_000),
    retryBaseMs: r.int('SVC_PKI_OUTBOX_RETRY_BASE_MS', 1000, 10, 3_600_000),
    retryMaxMs: r.int('SVC_PKI_OUTBOX_RETRY_MAX_MS', 300_000, 10, 86_400_000),
    retentionSecs: r.int('SVC_PKI_OUTBOX_RETENTION_SECS', 604_800, 0, 315_360_000),
  };
}

export type Config = ReturnType<typeof loadConfig>;

/** A loggable view: listener addresses and switches, never secrets or the database password. */
export function describeConfig(config: Config) {
  const listen = Object.fromEntries(
    Object.entries(config.listeners).map(([k, a]) => [k, a ? `${a.host}:${a.port}` : 'off']),
  );
  let database = 'embedded';
  if (config.database.url) {
    const u = new URL(config.database.url);
    database = `${u.protocol}//${u.hostname}:${u.port || 5432}${u.pathname}`;
  }
  return { listen, database, logLevel: config.logLevel, workers: config.workers.threads };
}
