// The gRPC runtime listener (@grpc/grpc-js): loads the service definitions, hosts each domain's
// implementation, maps AppError kinds to gRPC status codes. Authz uses it now, certificates later.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { isUnexpected, toAppError, type ErrorKind } from '../errors.js';
import type { Logger } from '../log.js';
import { sourceDir } from '../paths.js';
import { readPemFile } from '../pem-files.js';

export const PROTO_FILE = path.join(sourceDir, 'grpc', 'proto', 'svc.proto');

/** snake_case field names as written in the .proto; enums as strings; absent scalars as defaults. */
export function loadServices(file = PROTO_FILE): grpc.GrpcObject {
  const definition = protoLoader.loadSync(file, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  return grpc.loadPackageDefinition(definition);
}

/** The service constructor svc.v1.<name> of the loaded definitions. */
export function serviceOf(services: grpc.GrpcObject, name: string): grpc.ServiceClientConstructor {
  const pkg = (services.svc as grpc.GrpcObject).v1 as grpc.GrpcObject;
  return pkg[name] as grpc.ServiceClientConstructor;
}

const STATUS: Record<ErrorKind, grpc.status> = {
  INVALID_INPUT: grpc.status.INVALID_ARGUMENT,
  UNAUTHENTICATED: grpc.status.UNAUTHENTICATED,
  FORBIDDEN: grpc.status.PERMISSION_DENIED,
  NOT_FOUND: grpc.status.NOT_FOUND,
  METHOD_NOT_ALLOWED: grpc.status.UNIMPLEMENTED,
  CONFLICT: grpc.status.ALREADY_EXISTS,
  PAYLOAD_TOO_LARGE: grpc.status.RESOURCE_EXHAUSTED,
  UNSUPPORTED_MEDIA_TYPE: grpc.status.INVALID_ARGUMENT,
  NOT_IMPLEMENTED: grpc.status.UNIMPLEMENTED,
  RATE_LIMITED: grpc.status.RESOURCE_EXHAUSTED,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
  INTERNAL: grpc.status.INTERNAL,
};

/** Any thrown value as a gRPC error: the same translation and logging as the HTTP edge. */
export function toGrpcError(err: unknown, log: Logger, method: string): grpc.ServiceError {
  const appErr = toAppError(err);
  if (isUnexpected(appErr)) log.error('gRPC call failed', { method, err });
  return Object.assign(new Error(appErr.message), { code: STATUS[appErr.kind], details: appErr.message, metadata: new grpc.Metadata() });
}

/** Request headers of a call as the HTTP edge sees them (lower-case names, first value). */
export function headersOf(call: grpc.ServerUnaryCall<unknown, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(call.metadata.getMap())) headers[key.toLowerCase()] = String(value);
  return headers;
}

export interface GrpcServer {
  readonly services: grpc.GrpcObject;
  addService(name: string, impl: grpc.UntypedServiceImplementation): void;
  listen(host: string, port: number): Promise<number>;
  close(timeoutMs: number): Promise<void>;
}

export interface GrpcTls {
  tlsCertPath?: string | undefined;
  tlsKeyPath?: string | undefined;
  /** Set: clients must present a certificate signed by this CA (mTLS). */
  clientCaPath?: string | undefined;
}

const read = (file: string, what: string) => readPemFile(file, `gRPC ${what}`);

/** Plaintext without a certificate (as upstream without GRPC TLS settings); TLS with one; mTLS with a client CA. */
function credentialsOf(tls: GrpcTls): grpc.ServerCredentials {
  if (!tls.tlsCertPath || !tls.tlsKeyPath) return grpc.ServerCredentials.createInsecure();
  const pair = { cert_chain: read(tls.tlsCertPath, 'certificate'), private_key: read(tls.tlsKeyPath, 'key') };
  const ca = tls.clientCaPath ? read(tls.clientCaPath, 'client CA') : null;
  return grpc.ServerCredentials.createSsl(ca, [pair], ca !== null);
}

export function createGrpcServer(log: Logger, tls: GrpcTls = {}): GrpcServer {
  const services = loadServices();
  const server = new grpc.Server();
  let started = false;
  return {
    services,
    addService(name, impl) {
      server.addService(serviceOf(services, name).service, impl);
    },
    listen(host, port) {
      const credentials = credentialsOf(tls);
      return new Promise((resolve, reject) => {
        server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, credentials, (err, bound) => {
          if (err) return reject(new Error(`grpc listener cannot bind ${host}:${port}: ${err.message}`));
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
