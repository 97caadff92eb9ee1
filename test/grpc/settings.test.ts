// The gRPC listener's settings and error table without a server: the SVC_GRPC_* options (defaults,
// bounds, the grpc-js options they become) and every AppError kind's status code (INTERFACES.md section 4).
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config.js';
import { AppError, ERROR_KINDS, type ErrorKind } from '../../src/errors.js';
import { STATUS, toGrpcError } from '../../src/grpc/call.js';
import { serverOptions } from '../../src/grpc/server.js';
import { createLogger } from '../../src/log.js';

t.test('defaults and the grpc-js options they become', async (t) => {
  const c = loadConfig({});
  t.same(c.listeners.grpc, { host: '0.0.0.0', port: 8081 }, 'INTERFACES.md: 0.0.0.0:8081');
  t.same(serverOptions(c.grpc), {
    'grpc.max_receive_message_length': 65_536, 'grpc.max_send_message_length': 65_536,
    'grpc.keepalive_time_ms': 7_200_000, 'grpc.keepalive_timeout_ms': 20_000, 'grpc.max_concurrent_streams': 1000,
  });
  const set = loadConfig({ SVC_GRPC_MAX_MESSAGE_BYTES: '2048', SVC_GRPC_KEEPALIVE_TIME_MS: '30000', SVC_GRPC_KEEPALIVE_TIMEOUT_MS: '5000', SVC_GRPC_MAX_CONCURRENT_STREAMS: '64' });
  t.match(set.grpc, { maxMessageBytes: 2048, keepaliveTimeMs: 30_000, keepaliveTimeoutMs: 5000, maxConcurrentStreams: 64 });
});

t.test('out-of-range values are refused at start, all at once', async (t) => {
  const err = t.throws(() => loadConfig({
    SVC_GRPC_MAX_MESSAGE_BYTES: '10', SVC_GRPC_KEEPALIVE_TIME_MS: '5', SVC_GRPC_MAX_CONCURRENT_STREAMS: '0', SVC_GRPC_TLS_CERT_PATH: '/x.pem',
  })) as ConfigError;
  t.ok(err instanceof ConfigError);
  for (const name of ['SVC_GRPC_MAX_MESSAGE_BYTES', 'SVC_GRPC_KEEPALIVE_TIME_MS', 'SVC_GRPC_MAX_CONCURRENT_STREAMS', 'SVC_GRPC_TLS_CERT_PATH and SVC_GRPC_TLS_KEY_PATH']) {
    t.match(err.message, name);
  }
});

t.test('error kinds to status codes', async (t) => {
  const want: Partial<Record<ErrorKind, grpc.status>> = {
    NOT_FOUND: grpc.status.NOT_FOUND, INVALID_INPUT: grpc.status.INVALID_ARGUMENT, UNAUTHENTICATED: grpc.status.UNAUTHENTICATED,
    FORBIDDEN: grpc.status.PERMISSION_DENIED, CONFLICT: grpc.status.ALREADY_EXISTS, RATE_LIMITED: grpc.status.RESOURCE_EXHAUSTED,
    INTERNAL: grpc.status.INTERNAL,
  };
  for (const [kind, code] of Object.entries(want)) t.equal(STATUS[kind as ErrorKind], code, `${kind} (INTERFACES.md)`);
  t.same(Object.keys(STATUS).sort(), Object.keys(ERROR_KINDS).sort(), 'every kind has a code');
  const log = createLogger('silent');
  const limited = toGrpcError(new AppError('RATE_LIMITED', 'too many failed login attempts', { retryAfterSeconds: 42 }), log, 'm');
  t.match(limited, { code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many failed login attempts' });
  t.same(limited.metadata.get('retry-after'), ['42']);
  t.match(toGrpcError(new Error('secret detail'), log, 'm'), { code: grpc.status.INTERNAL, details: 'internal error' }, 'an unexpected error says nothing more');
});
