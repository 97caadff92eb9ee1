// The plain request/reply shapes handlers see: no uWS objects escape the http/ folder.
import { httpErrorBody, invalidInput, type AppError } from '../errors.js';

export interface HttpRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  /** Raw query string without '?'. */
  query: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** Route parameters in pattern order (`:name` segments). */
  params: string[];
  ip: string;
  requestId: string;
  /** The body, read up to the route's limit before the handler runs; empty for routes without one. */
  body: Buffer;
  /** True once the client went away: handlers doing long work may stop early. */
  readonly aborted: boolean;
}

export type ReplyBody = string | Buffer | Uint8Array | AsyncIterable<string | Uint8Array>;

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  body?: ReplyBody;
}

export type HttpHandler = (req: HttpRequest) => HttpReply | Promise<HttpReply>;

export interface RouteOptions {
  /** Read the body (up to this many bytes, else 413) before calling the handler. */
  bodyLimit?: number;
  /**
   * Request headers the handler reads (lower-case). Default: authorization, content-type,
   * content-length, x-request-id, x-forwarded-for. 'all' for every header.
   */
  headers?: readonly string[] | 'all';
  /**
   * For handlers with effects (a publish stores messages): start the handler one setImmediate after the
   * body arrived, once uWS has parsed every byte that came with it. uWS refuses asynchronous pipelining:
   * a request arriving behind one still unanswered closes the connection, both unanswered. Started at
   * once, the first would still be carried out, and a client retrying what got no answer would store it
   * twice; deferred, it sees the connection gone and does nothing.
   */
  startAfterParse?: boolean;
  /**
   * With bodyLimit: runs before the body is taken (it streams in meanwhile, up to the limit). A reply
   * answers the request in place of the handler, so a route can refuse (404, 401, 403) before it takes a
   * body or measures one against the limit; undefined lets the request through to the limit and the handler.
   */
  precheck?: (req: HttpRequest) => HttpReply | undefined | Promise<HttpReply | undefined>;
  /** With precheck: told when a request it let through is refused (413) for the size of its body. */
  onTooLarge?: (req: HttpRequest) => void;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS' | 'HEAD' | 'ANY';

// Frozen: the server writes a frozen header set from bytes it encoded once (see writeHead).
export const JSON_HEADERS = Object.freeze({ 'content-type': 'application/json' } as const);

export function json(status: number, value: unknown, headers?: Record<string, string>): HttpReply {
  return { status, headers: headers ? { ...JSON_HEADERS, ...headers } : JSON_HEADERS, body: JSON.stringify(value) };
}

/** An error as the `{ error }` reply every REST route answers, with Retry-After when it has one. */
export function errorReply(err: AppError, extraHeaders?: Readonly<Record<string, string>>): HttpReply {
  const headers: Record<string, string> = { ...extraHeaders };
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(err.retryAfterSeconds)));
  return json(err.status, httpErrorBody(err), headers);
}

/** 405 with the Allow header RFC 9110 requires, naming the method refused and the ones allowed. */
export function methodNotAllowed(method: string, allowed: readonly string[], headers?: Record<string, string>): HttpReply {
  const allow = allowed.join(', ');
  return json(405, { error: `method not allowed: ${method}; allowed: ${allow}` }, { ...headers, allow });
}

export function empty(status: number, headers?: Record<string, string>): HttpReply {
  return headers ? { status, headers } : { status };
}

/**
 * A path segment with its percent-escapes decoded; a malformed escape ('%zz', a cut UTF-8 sequence) is
 * the client's mistake (400), never an exception that escapes a uWS callback. Most segments (ids) hold
 * no escape and are returned as they are.
 */
export function decodePathSegment(raw: string): string {
  if (raw.indexOf('%') === -1) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw invalidInput('malformed percent-encoding in the request path');
  }
}

export function searchParams(req: HttpRequest): URLSearchParams {
  return new URLSearchParams(req.query);
}
