// The gRPC runtime listener (@grpc/grpc-js): loads the one proto (package atom.v1) at start, hosts each
// domain's implementation, and owns the listener's settings (TLS, message size, keepalive, streams).
// Every service the proto declares is added by the composition root (src/main.ts); one not added would
// answer UNIMPLEMENTED.
import type { EventEmitter } from 'node:events';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Logger } from '../log.js';
import { sourceDir } from '../paths.js';
import { readPemFile } from '../pem-files.js';
import type { ClientCertificates } from '../pki/index.js';
import { createUnary, tolerantDeserializer, type CallStats, type Unary, type VerifyToken } from './call.js';
import { createPeerGate } from './peer.js';

/** Read at start from the source tree (the Dockerfile ships src/), like the GraphQL SDL. */
export const PROTO_FILE = path.join(sourceDir, 'grpc', 'proto', 'atom', 'v1', 'atom.proto');
export const PROTO_PACKAGE = 'atom.v1';
export const SERVICE_NAMES = ['AuthzService', 'AuthService', 'CertificateService', 'AliasService'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** snake_case field names as written in the .proto; enums as strings; absent scalars as defaults. */
export const LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

export function loadDefinition(file = PROTO_FILE): protoLoader.PackageDefinition {
  return protoLoader.loadSync(file, LOADER_OPTIONS);
}

export function loadServices(file = PROTO_FILE): grpc.GrpcObject {
  return grpc.loadPackageDefinition(loadDefinition(file));
}

/** The client/service constructor atom.v1.<name> of the loaded definitions. */
export function serviceOf(services: grpc.GrpcObject, name: ServiceName): grpc.ServiceClientConstructor {
  const pkg = (services.atom as grpc.GrpcObject).v1 as grpc.GrpcObject;
  return pkg[name] as grpc.ServiceClientConstructor;
}

export interface GrpcTls {
  tlsCertPath?: string | undefined;
  tlsKeyPath?: string | undefined;
  /**
   * Set: clients must present a certificate whose chain verifies against this file (mTLS); one the service
   * issued must also be active in its records (src/grpc/peer.ts).
   */
  clientCaPath?: string | undefined;
}

export interface GrpcSettings extends GrpcTls {
  maxMessageBytes: number;
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  maxConcurrentStreams: number;
}

/**
 * The grpc-js server options of the listener. Exported for the bench, whose baseline server is built
 * from the same options (bench/lib/grpc-bare-server.js) so the comparison differs only in the handlers.
 */
export function serverOptions(s: Omit<GrpcSettings, keyof GrpcTls>): grpc.ServerOptions {
  return {
    'grpc.max_receive_message_length': s.maxMessageBytes,
    'grpc.max_send_message_length': s.maxMessageBytes,
    'grpc.keepalive_time_ms': s.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': s.keepaliveTimeoutMs,
    'grpc.max_concurrent_streams': s.maxConcurrentStreams,
  };
}

const read = (file: string, what: string) => readPemFile(file, `gRPC ${what}`);

/** Plaintext without a certificate (as upstream without GRPC TLS settings); TLS with one; mTLS with a client CA. */
function credentialsOf(tls: GrpcTls): grpc.ServerCredentials {
  if (!tls.tlsCertPath || !tls.tlsKeyPath) return grpc.ServerCredentials.createInsecure();
  const pair = { cert_chain: read(tls.tlsCertPath, 'certificate'), private_key: read(tls.tlsKeyPath, 'key') };
  const ca = tls.clientCaPath ? read(tls.clientCaPath, 'client CA') : null;
  return grpc.ServerCredentials.createSsl(ca, [pair], ca !== null);
}

/**
 * Node's HTTP/2 header parsing keeps the first of a repeated single-value header such as authorization
 * and drops the rest, so a call sent with two `authorization` values would act on the first. The raw
 * header list still holds them all: they are put back before grpc-js reads the headers, and callerOf
 * refuses the call (UNAUTHENTICATED). grpc-js keeps its HTTP/2 servers in a private map; should a
 * release stop doing so, test/auth/lockout.test.ts fails.
 */
function keepRepeatedAuthorization(server: grpc.Server, hooked: WeakSet<object>): void {
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  for (const h2 of servers?.keys() ?? []) {
    if (hooked.has(h2)) continue;
    hooked.add(h2);
    h2.prependListener('stream', (_stream: unknown, headers: Record<string, string | string[] | undefined>, _flags: unknown, raw: unknown) => {
      if (headers.authorization === undefined || !Array.isArray(raw)) return;
      let count = 0;
      for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'authorization') count++;
      if (count < 2) return;
      const values: string[] = [];
      for (let i = 0; i < raw.length; i += 2) if (raw[i] === 'authorization') values.push(String(raw[i + 1]));
      headers.authorization = values;
    });
  }
}

export interface GrpcServer {
  readonly services: grpc.GrpcObject;
  /** Wraps a handler: deadline checks, error mapping, call counters (src/grpc/call.ts). */
  readonly unary: Unary;
  readonly stats: CallStats;
  addService(name: ServiceName, impl: grpc.UntypedServiceImplementation): void;
  listen(host: string, port: number): Promise<number>;
  close(timeoutMs: number): Promise<void>;
}

/** What mutual TLS checks each call with: the client-certificate verifier, and the bearer verifier for the binding. */
export interface GrpcPeers {
  clientCertificates: ClientCertificates;
  verifyToken: VerifyToken;
}

export function createGrpcServer(log: Logger, settings: GrpcSettings, peers?: GrpcPeers): GrpcServer {
  const services = loadServices();
  const server = new grpc.Server(serverOptions(settings));
  const mutual = Boolean(settings.tlsCertPath && settings.tlsKeyPath && settings.clientCaPath);
  if (mutual && !peers) throw new Error('gRPC mutual TLS needs the client-certificate verifier');
  const { unary, stats } = createUnary(log, mutual && peers ? createPeerGate(peers) : undefined);
  const hooked = new WeakSet<object>();
  let started = false;
  return {
    services,
    unary,
    stats,
    addService(name, impl) {
      // Undecodable request bytes are the client's fault: INVALID_ARGUMENT from the call wrapper, not grpc-js's INTERNAL.
      const definition = Object.fromEntries(Object.entries(serviceOf(services, name).service).map(([method, def]) => [method, {
        ...def, requestDeserialize: tolerantDeserializer(def.requestDeserialize, `${method} request`),
      }]));
      server.addService(definition, impl);
    },
    listen(host, port) {
      // Read before binding: a missing key file stops the start with a message naming it.
      const credentials = credentialsOf(settings);
      return new Promise((resolve, reject) => {
        server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, credentials, (err, bound) => {
          if (err) return reject(new Error(`grpc listener cannot bind ${host}:${port}: ${err.message}`));
          keepRepeatedAuthorization(server, hooked);
          started = true;
          resolve(bound);
        });
      });
    },
    close(timeoutMs) {
      if (!started) return Promise.resolve();
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          log.warn('gRPC shutdown timed out; forcing');
          server.forceShutdown();
          resolve();
        }, timeoutMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
