// One gRPC call's life: the bearer caller from `authorization` metadata, the client's deadline, and the
// translation of AppError kinds into status codes (INTERFACES.md section 4). Handlers answer synchronously
// when everything they need is cached, so the hot path allocates no promise.
import * as grpc from '@grpc/grpc-js';
// The leaf modules, not the auth domain's index: like src/graphql/context.ts, this plumbing (and the bench's
// baseline server, which loads it from dist/) needs the bearer parser and the Principal type, nothing else.
import { bearerToken } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { invalidInput, isUnexpected, toAppError, unauthenticated, type ErrorKind } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * INTERFACES.md section 4: not found, bad request, unauthenticated, forbidden, conflict, rate limit, else
 * INTERNAL. The HTTP-only kinds upstream has no counterpart for get the standard code of their meaning:
 * an oversized body is RESOURCE_EXHAUSTED (as grpc-js answers an oversized message itself), something not
 * implemented UNIMPLEMENTED, and a dependency that is down stays UNAVAILABLE, the code clients retry on.
 */
export const STATUS: Record<ErrorKind, grpc.status> = {
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

/**
 * A status no AppError kind stands for, with trailers saying why: CertificateService answers a revoked
 * certificate FAILED_PRECONDITION and an expired one OUT_OF_RANGE (docs/grpc.md). Passed through as is.
 */
export class GrpcStatusError extends Error {
  constructor(readonly code: grpc.status, message: string, readonly trailers: Readonly<Record<string, string>> = {}) {
    super(message);
    this.name = 'GrpcStatusError';
  }
}

/** Any thrown value as a gRPC error: the same translation and logging as the HTTP edge. */
export function toGrpcError(err: unknown, log: Logger, method: string): grpc.ServiceError {
  if (err instanceof GrpcStatusError) {
    const metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(err.trailers)) metadata.set(key, value);
    return Object.assign(new Error(err.message), { code: err.code, details: err.message, metadata });
  }
  const appErr = toAppError(err);
  if (isUnexpected(appErr)) log.error('gRPC call failed', { method, err });
  const metadata = new grpc.Metadata();
  // A lockout or rate limit says when to come back, as Retry-After does over HTTP.
  if (appErr.retryAfterSeconds !== undefined) metadata.set('retry-after', String(appErr.retryAfterSeconds));
  return Object.assign(new Error(appErr.message), { code: STATUS[appErr.kind], details: appErr.message, metadata });
}

export type TokenVerdict = { ok: true; principal: Principal } | { ok: false; reason: string };
/** The bearer verifier of the auth domain: synchronous on a cache hit. */
export type VerifyToken = (token: string) => TokenVerdict | Promise<TokenVerdict>;

const REFUSED: Record<string, string> = {
  malformed: 'malformed token', invalid: 'invalid token', expired: 'expired token', revoked: 'revoked token',
  inactive: 'token of an inactive entity or tenant',
};

/** A token's verdict as the caller, or UNAUTHENTICATED naming what was wrong with it. */
export function principalOf(verdict: TokenVerdict): Principal {
  if (verdict.ok) return verdict.principal;
  throw unauthenticated(REFUSED[verdict.reason] ?? 'invalid token');
}

/**
 * The caller behind `authorization: Bearer <token>`: synchronous when the token is cached. More than one
 * value names no one caller (server.ts restores the values HTTP/2 header parsing would drop).
 */
export function callerOf(metadata: grpc.Metadata, verify: VerifyToken): Principal | Promise<Principal> {
  const values = metadata.get('authorization');
  if (values.length === 0) throw unauthenticated('missing authorization metadata');
  if (values.length > 1) throw unauthenticated('authorization metadata must have exactly one value');
  const header = values[0];
  if (typeof header !== 'string') throw unauthenticated('invalid authorization metadata');
  const token = bearerToken(header);
  if (token === null) throw unauthenticated('expected Bearer token');
  const verdict = verify(token);
  return verdict instanceof Promise ? verdict.then(principalOf) : principalOf(verdict);
}

/**
 * What a request deserializer returns for bytes that are no message of its type. grpc-js answers a throwing
 * deserializer with INTERNAL, the code of a server fault; the unary wrapper answers this INVALID_ARGUMENT.
 */
const UNDECODABLE = Symbol('undecodable request');
interface Undecodable {
  [UNDECODABLE]: string;
}

/** A request deserializer that never throws: bytes it cannot decode become a marker naming what was wrong. */
export function tolerantDeserializer(deserialize: (bytes: Buffer) => unknown, typeName: string): (bytes: Buffer) => unknown {
  return (bytes) => {
    try {
      return deserialize(bytes);
    } catch (err) {
      const why = err instanceof Error ? err.message.slice(0, 120) : 'malformed';
      return { [UNDECODABLE]: `request message is not a valid ${typeName}: ${why}` } satisfies Undecodable;
    }
  };
}

const undecodable = (request: unknown): string | null =>
  typeof request === 'object' && request !== null && UNDECODABLE in request ? (request as Undecodable)[UNDECODABLE] : null;

/** Thrown by checkpoint() once the client gave up: the rest of the handler's work is skipped. */
class Abandoned extends Error {}

/**
 * The client certificate of a call under mutual TLS, once verified (src/grpc/peer.ts): the credential,
 * entity and tenant when the service issued it; only the subject for an operator's external CA's.
 */
export interface CallPeer {
  credentialId: string | null;
  entityId: string | null;
  tenantId: string | null;
  subject: string | null;
}

/** Runs before every handler when the listener asks for client certificates: refuses the call, or says who the peer is. */
export type CallGate = (call: grpc.ServerUnaryCall<unknown, unknown>, metadata: grpc.Metadata) => Promise<CallPeer>;

export interface CallContext {
  readonly metadata: grpc.Metadata;
  /** The verified client certificate under mutual TLS (null without it): handlers record it with what they write. */
  peer: CallPeer | null;
  /**
   * Call between steps that cost something (a query, a password hash): throws once the deadline passed
   * or the client cancelled, so work nobody waits for is not done (nor a failed attempt counted).
   */
  checkpoint(): void;
  /** The client's address (the connection's peer, without its port); '' when unknown. */
  address(): string;
}

/** grpc-js getPeer(): 'address:port' (IPv6 unbracketed), the address alone, or 'unknown'. */
export function peerAddress(peer: string): string {
  if (peer === 'unknown') return '';
  const colon = peer.lastIndexOf(':');
  // An address with a port ends in ':digits'; a bare IPv6 address may too, but grpc-js always adds the port.
  return colon > 0 && /^\d+$/.test(peer.slice(colon + 1)) ? peer.slice(0, colon) : peer;
}

export type Handler<Req, Res> = (request: Req, ctx: CallContext) => Res | Promise<Res>;
export type Unary = <Req, Res>(method: string, handler: Handler<Req, Res>) => grpc.handleUnaryCall<Req, Res>;

export interface CallStats {
  /** Calls received. */
  calls: number;
  /** Calls whose deadline passed (or whose client cancelled) before the handler finished its work. */
  abandoned: number;
  /** Per method (bound when its handler is wrapped): answers by status code, codes[n] for grpc.status n. */
  readonly methods: MethodCalls[];
}

export interface MethodCalls {
  readonly method: string;
  readonly codes: Float64Array;
}

/** grpc.status runs from OK (0) to UNAUTHENTICATED (16). */
const STATUS_CODES = 17;

function answered(calls: MethodCalls, code: number): void {
  const codes = calls.codes;
  const slot = code >= 0 && code < STATUS_CODES ? code : grpc.status.UNKNOWN;
  codes[slot] = (codes[slot] as number) + 1;
}

function deadlineMs(call: grpc.ServerUnaryCall<unknown, unknown>): number {
  const d = call.getDeadline();
  return d instanceof Date ? d.getTime() : d;
}

export function createUnary(log: Logger, gate?: CallGate): { unary: Unary; stats: CallStats } {
  const stats: CallStats = { calls: 0, abandoned: 0, methods: [] };
  const unary: Unary = (method, handler) => {
    const calls: MethodCalls = { method, codes: new Float64Array(STATUS_CODES) };
    stats.methods.push(calls);
    return (call, callback) => {
      stats.calls++;
      const deadline = deadlineMs(call);
      const ctx: CallContext = {
        metadata: call.metadata,
        peer: null,
        checkpoint() {
          if (call.cancelled || deadline <= Date.now()) throw new Abandoned();
        },
        address: () => peerAddress(call.getPeer()),
      };
      const fail = (err: unknown) => {
        if (err instanceof Abandoned) {
          stats.abandoned++;
          answered(calls, grpc.status.DEADLINE_EXCEEDED);
          // grpc-js has answered DEADLINE_EXCEEDED or CANCELLED already; this status goes nowhere.
          return callback({ code: grpc.status.DEADLINE_EXCEEDED, details: 'deadline exceeded' });
        }
        const error = toGrpcError(err, log, method);
        answered(calls, error.code ?? grpc.status.UNKNOWN);
        callback(error);
      };
      let result;
      try {
        const garbled = undecodable(call.request);
        if (garbled !== null) throw invalidInput(garbled);
        ctx.checkpoint();
        result = gate
          ? gate(call as grpc.ServerUnaryCall<unknown, unknown>, call.metadata).then((peer) => {
            ctx.peer = peer;
            ctx.checkpoint();
            return handler(call.request, ctx);
          })
          : handler(call.request, ctx);
      } catch (err) {
        return fail(err);
      }
      if (result instanceof Promise) {
        result.then((res) => {
          answered(calls, grpc.status.OK);
          callback(null, res);
        }, fail);
      } else {
        answered(calls, grpc.status.OK);
        callback(null, result);
      }
    };
  };
  return { unary, stats };
}
