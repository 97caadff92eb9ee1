// A uWS listener: routing (with 405 and HEAD for every GET), the headers each route reads, request ids,
// measurement per route and the listener's life (listen, drain, close). Replies are written by
// replies.ts, bodies read by body.ts, each exchange is an Exchange (exchange.ts).
import { performance } from 'node:perf_hooks';
import { payloadTooLarge, toAppError, type AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { BucketCounts, LATENCY_SECONDS } from '../metrics/buckets.js';
import { checkThenRead, readBody } from './body.js';
import { Exchange, requestIdFor, type RouteStats } from './exchange.js';
import { lengthsConflict, readBodyHeaders } from './framing.js';
import { Replies } from './replies.js';
import { decodePathSegment, errorReply, json, methodNotAllowed, type HttpHandler, type HttpMethod, type HttpReply, type RouteOptions } from './types.js';
import { nativeUws, type TemplatedApp, type UwsRequest, type UwsResponse, type us_listen_socket } from './uws.js';

export type { RouteStats } from './exchange.js';

// Shared by every route without parameters; handlers never mutate params.
const NO_PARAMS: string[] = [];
export const DEFAULT_HEADERS: readonly string[] = ['authorization', 'content-type', 'content-length', 'x-request-id', 'x-forwarded-for'];
const METHODS: Record<string, string> = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', delete: 'DELETE', options: 'OPTIONS', head: 'HEAD' };

/** What a route's requests are read with, worked out once when it is registered. */
interface RouteShape {
  method: HttpMethod;
  paramCount: number;
  /** wanted: the same names, for the one pass over every header a body request gets. */
  headers: 'all' | { names: readonly string[]; keys: Buffer[]; wanted: ReadonlySet<string> };
  stats: RouteStats;
}

export interface HttpServer {
  readonly name: string;
  readonly app: TemplatedApp;
  route(method: HttpMethod, pattern: string, handler: HttpHandler, options?: RouteOptions): void;
  listen(host: string, port: number): Promise<number>;
  /** Close the listen sockets; connections already open keep being served. */
  stopAccepting(): void;
  /** Resolves when no request is in flight, or after the timeout. */
  drain(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
  readonly inFlight: number;
  /** Start counting requests per route (metrics enabled); until then nothing is timed or counted. */
  measure(): void;
  /** Every route's counters (read at scrape time). */
  readonly routeStats: readonly RouteStats[];
}

/** RouteOptions.startAfterParse: a request whose connection uWS closed meanwhile (pipelining) is not started. */
function startParsed(replies: Replies, ex: Exchange, handler: HttpHandler): void {
  if (ex.aborted) return;
  ex.corked = false;
  replies.run(ex, handler);
}

export function createHttpServer(name: string, log: Logger): HttpServer {
  const uws = nativeUws();
  const app = uws.App();
  const sockets: us_listen_socket[] = [];
  const replies = new Replies(log);
  let measuring = false;
  const routeStats: RouteStats[] = [];
  function statsFor(method: string, route: string): RouteStats {
    const stats: RouteStats = { method, route, statuses: new Float64Array(6), latency: new BucketCounts(LATENCY_SECONDS) };
    routeStats.push(stats);
    return stats;
  }

  /** An ambiguously framed request: nothing on its connection is answered (framing.ts). */
  function cut(res: UwsResponse): void {
    log.debug('request with conflicting Content-Length headers: connection closed unanswered');
    res.close();
  }

  function handle(res: UwsResponse, req: UwsRequest, route: RouteShape, handler: HttpHandler, options: RouteOptions): void {
    const started = measuring ? performance.now() : 0;
    const { method: routeMethod, paramCount } = route;
    // Only the headers a route reads cross from native to JS: each one is a call and a string (the names
    // go as bytes encoded once). A request with a body has all of them read in one pass, which also vets
    // what frames and codes the body (framing.ts).
    const headers: Record<string, string> = {};
    const limit = options.bodyLimit;
    let refusal: HttpReply | undefined;
    if (limit !== undefined) {
      const found = readBodyHeaders(req, route.headers === 'all' ? null : route.headers.wanted, headers);
      if (found === 'cut') return cut(res);
      refusal = found;
    } else {
      if (route.headers === 'all') {
        req.forEach((key, value) => {
          headers[key] = value;
        });
      } else {
        const { names, keys } = route.headers;
        for (let i = 0; i < names.length; i++) {
          const value = req.getHeader(keys[i] as Buffer);
          if (value !== '') headers[names[i] as string] = value;
        }
      }
      // A route that reads no body still has one framed by uWS (by its first length): the same check.
      if (lengthsConflict(req)) return cut(res);
    }
    let params = NO_PARAMS;
    let badPath: AppError | undefined;
    if (paramCount > 0) {
      params = [];
      try {
        for (let i = 0; i < paramCount; i++) params.push(decodePathSegment(req.getParameter(i) ?? ''));
      } catch (err) {
        badPath = toAppError(err);
        params = NO_PARAMS;
      }
    }
    const incomingId = headers['x-request-id'];
    // A route for one method knows it already: only ANY asks uWS (one native call and a string less).
    let method: string = routeMethod;
    if (routeMethod === 'ANY') {
      const asked = req.getMethod();
      method = METHODS[asked] ?? asked.toUpperCase();
    }
    const ex = new Exchange(
      res,
      method,
      req.getUrl(),
      req.getQuery() ?? '',
      headers,
      params,
      requestIdFor(incomingId),
    );
    replies.begin();
    if (measuring) {
      ex.stats = route.stats;
      ex.started = started;
    }
    // Answered before any body is read: a route with a body closes the connection on it.
    if (badPath !== undefined) return limit === undefined ? replies.send(ex, errorReply(badPath)) : replies.sendAndClose(ex, errorReply(badPath));
    if (refusal !== undefined) return replies.sendAndClose(ex, refusal);
    if (limit === undefined) {
      replies.run(ex, handler);
      ex.corked = false;
      return;
    }
    replies.watchAbort(ex);
    if (options.precheck) return checkThenRead(replies, ex, limit, handler, options);
    ex.corked = false;
    const declared = Number(headers['content-length']);
    if (declared > limit) return replies.sendAndClose(ex, errorReply(payloadTooLarge(limit)));
    if (options.startAfterParse === true) {
      readBody(replies, ex, limit, (body) => {
        ex.body = body;
        setImmediate(startParsed, replies, ex, handler);
      });
      return;
    }
    readBody(replies, ex, limit, (body) => {
      ex.body = body;
      replies.run(ex, handler);
    });
  }

  function register(method: HttpMethod, pattern: string, fn: (res: UwsResponse, req: UwsRequest) => void): void {
    switch (method) {
      case 'GET': app.get(pattern, fn); break;
      case 'POST': app.post(pattern, fn); break;
      case 'PUT': app.put(pattern, fn); break;
      case 'PATCH': app.patch(pattern, fn); break;
      case 'DELETE': app.del(pattern, fn); break;
      case 'OPTIONS': app.options(pattern, fn); break;
      case 'HEAD': app.head(pattern, fn); break;
      case 'ANY': app.any(pattern, fn); break;
    }
  }

  // Methods per route pattern: a request for one of them with another method answers 405 with Allow
  // (RFC 9110 15.5.6), not the wildcard's 404. uWS matches an ANY handler after the methods of its pattern.
  const allowed = new Map<string, string[]>();
  function allowOn(method: HttpMethod, pattern: string): void {
    let methods = allowed.get(pattern);
    if (methods === undefined) {
      allowed.set(pattern, (methods = []));
      const shape: RouteShape = { method: 'ANY', paramCount: 0, headers: { names: [], keys: [], wanted: new Set() }, stats: statsFor('ANY', pattern) };
      register('ANY', pattern, (res, req) => handle(res, req, shape, (r) => methodNotAllowed(r.method, methods!), {}));
    }
    methods.push(method);
  }

  const server: HttpServer = {
    name,
    app,
    route(method, pattern, handler, options = {}) {
      if (method !== 'ANY') allowOn(method, pattern);
      // Every GET route answers HEAD too (RFC 9110 9.3.2: a server that answers GET should answer HEAD).
      if (method === 'GET') server.route('HEAD', pattern, handler, options);
      const names = options.headers === 'all' ? 'all' : (options.headers ?? DEFAULT_HEADERS);
      const shape: RouteShape = {
        method,
        paramCount: pattern.split('/').filter((s) => s.startsWith(':')).length,
        headers: names === 'all' ? 'all' : { names, keys: names.map((n) => Buffer.from(n)), wanted: new Set(names) },
        stats: statsFor(method, pattern),
      };
      register(method, pattern, (res, req) => handle(res, req, shape, handler, options));
    },
    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`${name} listener cannot bind ${host}:${port}`));
          sockets.push(socket);
          resolve(uws.us_socket_local_port(socket as never));
        });
      });
    },
    stopAccepting() {
      replies.draining = true;
      for (const s of sockets.splice(0)) uws.us_listen_socket_close(s);
    },
    drain(timeoutMs) {
      if (replies.inFlight === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        replies.drained = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
    },
    async close() {
      replies.draining = true;
      for (const s of sockets.splice(0)) uws.us_listen_socket_close(s);
      // Replies written from async code are flushed by the event loop after the cork; closing in the
      // same tick would drop them. One loop turn lets the last replies reach the socket.
      await new Promise((resolve) => setImmediate(resolve));
      // Present in the native addon (closes every connection) but missing from its type declarations.
      (app as unknown as { close(): void }).close();
    },
    get inFlight() {
      return replies.inFlight;
    },
    measure() {
      measuring = true;
    },
    routeStats,
  };
  // Registered first, matched last: uWS prefers static and parameter routes over the wildcard.
  server.route('ANY', '/*', (req) => json(404, { error: `no route for ${req.method} ${req.path}` }));
  return server;
}
