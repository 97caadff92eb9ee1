// A uWS listener with routing, bounded body reading, abort safety, request ids, error mapping and draining.
import { randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import { AppError, isUnexpected, payloadTooLarge, toAppError } from '../errors.js';
import type { Logger } from '../log.js';
import { nativeUws, type TemplatedApp, type UwsRequest, type UwsResponse, type us_listen_socket } from './uws.js';
import { lengthsConflict, readBodyHeaders } from './framing.js';
import { BucketCounts, LATENCY_SECONDS } from '../metrics/buckets.js';
import { decodePathSegment, errorReply, json, methodNotAllowed, type HttpHandler, type HttpMethod, type HttpReply, type HttpRequest, type RouteOptions } from './types.js';

const EMPTY = Buffer.alloc(0);
// Shared by every route without parameters; handlers never mutate params.
const NO_PARAMS: string[] = [];
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
export const DEFAULT_HEADERS: readonly string[] = ['authorization', 'content-type', 'content-length', 'x-request-id', 'x-forwarded-for'];
const METHODS: Record<string, string> = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', delete: 'DELETE', options: 'OPTIONS', head: 'HEAD' };

// Request ids only need to be unique, not secret: a per-process random prefix and a counter are enough
// and cost nothing next to a random UUID per request.
const idPrefix = randomBytes(6).toString('hex');
let idCounter = 0;
function nextRequestId(): string {
  return `${idPrefix}-${(++idCounter).toString(36)}`;
}
const LARGE_BODY = 64 * 1024;

/** What a route's requests are read with, worked out once when it is registered. */
interface RouteShape {
  method: HttpMethod;
  paramCount: number;
  /** wanted: the same names, for the one pass over every header a body request gets. */
  headers: 'all' | { names: readonly string[]; keys: Buffer[]; wanted: ReadonlySet<string> };
  stats: RouteStats;
}

/**
 * Requests of one route (its pattern, never the path asked for), counted once measure() was called: the
 * route's own numbers, bound when it was registered, so a request costs two clock reads and three writes.
 */
export interface RouteStats {
  readonly method: string;
  readonly route: string;
  /** By status class: [0] requests that ended without a reply (client gone), [1..5] 1xx..5xx. */
  readonly statuses: Float64Array;
  /** Seconds from the request's arrival to the end of its reply. */
  readonly latency: BucketCounts;
}

// uWS takes bytes as they are but encodes every JS string it is given: what repeats is encoded once.
const statusLines = new Map<number, Buffer>();
function statusLine(status: number): Buffer {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = Buffer.from(`${status} ${STATUS_CODES[status] ?? ''}`.trimEnd());
    statusLines.set(status, line);
  }
  return line;
}
const REQUEST_ID_HEADER = Buffer.from('x-request-id');
const encodedHeaderSets = new WeakMap<object, Buffer[]>();
/** A frozen header set (a module constant) as name, value, name, value... bytes. */
function encodedHeaders(headers: Readonly<Record<string, string>>): Buffer[] {
  let encoded = encodedHeaderSets.get(headers);
  if (encoded === undefined) {
    encoded = Object.entries(headers).flatMap(([name, value]) => [Buffer.from(name), Buffer.from(value)]);
    encodedHeaderSets.set(headers, encoded);
  }
  return encoded;
}

/**
 * One request/response pair: the request a handler sees (as HttpRequest) and the bookkeeping the reader
 * and the writer share. One allocation per request, accessors on the prototype.
 */
class Exchange implements HttpRequest {
  aborted = false;
  done = false;
  /** onAborted is registered (only needed once the reply is not written synchronously). */
  watched = false;
  /** True while inside uWS's own callback, which is corked already. */
  corked = true;
  wake: (() => void) | undefined = undefined;
  body: Buffer = EMPTY;
  /** The route's counters, while the server is measured; the arrival time and the status written. */
  stats: RouteStats | undefined = undefined;
  started = 0;
  status = 0;
  private peer: string | undefined = undefined;

  constructor(
    readonly res: UwsResponse,
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly headers: Record<string, string>,
    readonly params: string[],
    readonly requestId: string,
  ) {}

  // The response object stays valid until it is ended or aborted, so the address is read on demand.
  get ip(): string {
    if (this.peer === undefined) this.peer = this.aborted ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString();
    return this.peer;
  }
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

export function createHttpServer(name: string, log: Logger): HttpServer {
  const uws = nativeUws();
  const app = uws.App();
  const sockets: us_listen_socket[] = [];
  let inFlight = 0;
  let draining = false;
  let drained: (() => void) | undefined;
  let measuring = false;
  const routeStats: RouteStats[] = [];
  function statsFor(method: string, route: string): RouteStats {
    const stats: RouteStats = { method, route, statuses: new Float64Array(6), latency: new BucketCounts(LATENCY_SECONDS) };
    routeStats.push(stats);
    return stats;
  }

  function finish(ex: Exchange): void {
    if (ex.done) return;
    ex.done = true;
    inFlight--;
    const stats = ex.stats;
    if (stats !== undefined) {
      const statuses = stats.statuses;
      const slot = (ex.status / 100) | 0;
      statuses[slot] = (statuses[slot] as number) + 1;
      stats.latency.observe((performance.now() - ex.started) / 1000);
    }
    if (inFlight === 0 && drained) drained();
  }

  function writeHead(ex: Exchange, reply: HttpReply): void {
    const { res } = ex;
    ex.status = reply.status;
    // uWS writes '200 OK' itself when no status was written: the most common reply costs one call less.
    if (reply.status !== 200) res.writeStatus(statusLine(reply.status));
    res.writeHeader(REQUEST_ID_HEADER, ex.requestId);
    const headers = reply.headers;
    if (headers === undefined) return;
    if (Object.isFrozen(headers)) {
      const encoded = encodedHeaders(headers);
      for (let i = 0; i < encoded.length; i += 2) res.writeHeader(encoded[i] as Buffer, encoded[i + 1] as Buffer);
    } else {
      for (const key in headers) res.writeHeader(key, headers[key] as string);
    }
  }

  function send(ex: Exchange, reply: HttpReply): void {
    if (ex.aborted || ex.done) return;
    if (ex.method === 'HEAD') return sendHead(ex, reply);
    const body = reply.body;
    if (body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      watchAbort(ex);
      void stream(ex, reply, body);
      return;
    }
    if (ex.corked) writeReply(ex, reply, body);
    else ex.res.cork(() => writeReply(ex, reply, body));
  }

  function writeReply(ex: Exchange, reply: HttpReply, body: string | Uint8Array | undefined): void {
    writeHead(ex, reply);
    if (body !== undefined && body.length > LARGE_BODY / 4) {
      const bytes = typeof body === 'string' ? Buffer.from(body) : body;
      if (bytes.byteLength > LARGE_BODY) return endLarge(ex, bytes);
    }
    ex.res.end(body, draining);
    finish(ex);
  }

  /**
   * HEAD runs the GET handler and sends its head: the status, the headers and the Content-Length the GET
   * body would have (RFC 9110 9.3.2), no body. A streamed body's length is not known: none is stated.
   */
  function sendHead(ex: Exchange, reply: HttpReply): void {
    const body = reply.body;
    let length: number | undefined;
    if (typeof body === 'string') length = Buffer.byteLength(body);
    else if (body instanceof Uint8Array) length = body.byteLength;
    else if (body !== undefined) void body[Symbol.asyncIterator]().return?.();
    const write = () => {
      writeHead(ex, reply);
      // The length is written by hand: this uWS build's endWithoutBody(length) leaves the response open
      // (uWS then aborts the process as for a handler that never answered); only the bare form ends it.
      if (length !== undefined) ex.res.writeHeader('content-length', String(length));
      ex.res.endWithoutBody();
      finish(ex);
    };
    if (ex.corked) write();
    else ex.res.cork(write);
  }

  /** Large bodies go out as the socket drains instead of being buffered whole in the kernel queue. */
  function endLarge(ex: Exchange, body: Uint8Array): void {
    const { res } = ex;
    const total = body.byteLength;
    const start = res.getWriteOffset();
    const [, done] = res.tryEnd(body, total);
    if (done) return finish(ex);
    watchAbort(ex);
    res.onWritable((offset) => {
      if (ex.aborted) return true;
      const [ok, finished] = res.tryEnd(body.subarray(offset - start), total);
      if (finished) finish(ex);
      return ok;
    });
  }

  async function stream(ex: Exchange, reply: HttpReply, body: AsyncIterable<string | Uint8Array>): Promise<void> {
    ex.res.cork(() => writeHead(ex, reply));
    const iterator = body[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await iterator.next();
        if (ex.aborted) break;
        if (next.done) {
          ex.res.cork(() => ex.res.end(undefined, draining));
          break;
        }
        let ok = true;
        ex.res.cork(() => {
          ok = ex.res.write(next.value);
        });
        if (!ok) {
          await new Promise<void>((resolve) => {
            ex.wake = resolve;
            ex.res.onWritable(() => {
              ex.wake = undefined;
              resolve();
              return true;
            });
          });
        }
      }
    } catch (err) {
      // Headers are gone already: the only honest signal left is cutting the connection.
      log.error('stream failed', { requestId: ex.requestId, err });
      if (!ex.aborted) ex.res.cork(() => ex.res.close());
    } finally {
      if (ex.aborted) await iterator.return?.();
      finish(ex);
    }
  }

  function fail(ex: Exchange, err: unknown): void {
    const appErr = toAppError(err);
    if (isUnexpected(appErr)) log.error('request failed', { requestId: ex.requestId, err });
    send(ex, errorReply(appErr));
  }

  /**
   * uWS needs onAborted only for responses written after its callback returned; a reply written
   * synchronously skips the registration (and its closure) altogether.
   */
  function watchAbort(ex: Exchange): void {
    if (ex.watched) return;
    ex.watched = true;
    ex.res.onAborted(() => {
      ex.aborted = true;
      ex.wake?.();
      finish(ex);
    });
  }

  function run(ex: Exchange, handler: HttpHandler): void {
    let result: HttpReply | Promise<HttpReply>;
    try {
      result = handler(ex);
    } catch (err) {
      return fail(ex, err);
    }
    if (result instanceof Promise) {
      watchAbort(ex);
      result.then((reply) => send(ex, reply), (err) => fail(ex, err));
    } else {
      send(ex, result);
    }
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
      incomingId !== undefined && REQUEST_ID.test(incomingId) ? incomingId : nextRequestId(),
    );
    inFlight++;
    if (measuring) {
      ex.stats = route.stats;
      ex.started = started;
    }
    // Answered before any body is read: a route with a body closes the connection on it.
    if (badPath !== undefined) return limit === undefined ? send(ex, errorReply(badPath)) : sendAndClose(ex, errorReply(badPath));
    if (refusal !== undefined) return sendAndClose(ex, refusal);
    if (limit === undefined) {
      run(ex, handler);
      ex.corked = false;
      return;
    }
    watchAbort(ex);
    if (options.precheck) return checkThenRead(ex, limit, handler, options);
    ex.corked = false;
    const declared = Number(headers['content-length']);
    if (declared > limit) return sendAndClose(ex, errorReply(payloadTooLarge(limit)));
    if (options.startAfterParse === true) {
      readBody(ex, limit, (body) => {
        ex.body = body;
        setImmediate(startParsed, ex, handler);
      });
      return;
    }
    readBody(ex, limit, (body) => {
      ex.body = body;
      run(ex, handler);
    });
  }

  /** RouteOptions.startAfterParse: a request whose connection uWS closed meanwhile (pipelining) is not started. */
  function startParsed(ex: Exchange, handler: HttpHandler): void {
    if (ex.aborted) return;
    ex.corked = false;
    run(ex, handler);
  }

  /** An error of a precheck as its reply (logged when it is ours, not the client's). */
  function replyOf(ex: Exchange, err: unknown): HttpReply {
    const appErr = toAppError(err);
    if (isUnexpected(appErr)) log.error('request failed', { requestId: ex.requestId, err });
    return errorReply(appErr);
  }

  /**
   * RouteOptions.precheck: the check and the body reading run side by side; the handler runs once both
   * are through. A refusal is answered at once (closing the connection when the body is not all read);
   * a body over the limit is answered 413 only once the check let the request through.
   */
  function checkThenRead(ex: Exchange, limit: number, handler: HttpHandler, options: RouteOptions): void {
    const precheck = options.precheck as NonNullable<RouteOptions['precheck']>;
    let verdict: { reply: HttpReply | undefined } | undefined;
    let body: Buffer | 'too large' | undefined;
    const decide = () => {
      if (verdict === undefined || ex.done || ex.aborted) return;
      if (verdict.reply !== undefined) {
        return body === undefined || body === 'too large' ? sendAndClose(ex, verdict.reply) : send(ex, verdict.reply);
      }
      if (body === undefined) return;
      if (body === 'too large') {
        options.onTooLarge?.(ex);
        return sendAndClose(ex, errorReply(payloadTooLarge(limit)));
      }
      ex.body = body;
      run(ex, handler);
    };
    let checked: HttpReply | undefined | Promise<HttpReply | undefined>;
    try {
      checked = precheck(ex);
    } catch (err) {
      checked = replyOf(ex, err);
    }
    if (checked instanceof Promise) {
      checked.then((reply) => {
        verdict = { reply };
      }, (err) => {
        verdict = { reply: replyOf(ex, err) };
      }).then(decide).catch((err) => fail(ex, err));
    } else if (checked !== undefined) {
      return sendAndClose(ex, checked);
    } else {
      verdict = { reply: undefined };
    }
    ex.corked = false;
    if (Number(ex.headers['content-length']) > limit) {
      body = 'too large';
      return decide();
    }
    readBody(ex, limit, (b) => {
      body = b;
      decide();
    }, () => {
      body = 'too large';
      decide();
    });
  }

  function sendAndClose(ex: Exchange, reply: HttpReply): void {
    // The unread body is still on the wire: close so it is not parsed as the next request.
    ex.res.cork(() => {
      writeHead(ex, reply);
      ex.res.end(reply.body as string, true);
      finish(ex);
    });
  }

  function readBody(ex: Exchange, limit: number, onBody: (body: Buffer) => void, onTooLarge?: () => void): void {
    let chunks: Buffer[] | undefined;
    let size = 0;
    let rejected = false;
    ex.res.onData((chunk, isLast) => {
      if (rejected || ex.aborted || ex.done) return;
      size += chunk.byteLength;
      if (size > limit) {
        rejected = true;
        return onTooLarge ? onTooLarge() : sendAndClose(ex, errorReply(payloadTooLarge(limit)));
      }
      // uWS reuses the chunk's memory after this callback returns: copy it, into Node's buffer pool when
      // small (a fresh ArrayBuffer per request costs an allocation the GC tracks apart).
      const copy = Buffer.allocUnsafe(chunk.byteLength);
      copy.set(new Uint8Array(chunk));
      if (!isLast) {
        (chunks ??= []).push(copy);
        return;
      }
      // uWS corks the socket around its data callback too: a reply written synchronously here needs no cork.
      ex.corked = true;
      if (chunks !== undefined) chunks.push(copy);
      onBody(chunks === undefined ? copy : Buffer.concat(chunks, size));
      ex.corked = false;
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
      draining = true;
      for (const s of sockets.splice(0)) uws.us_listen_socket_close(s);
    },
    drain(timeoutMs) {
      if (inFlight === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        drained = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
    },
    async close() {
      draining = true;
      for (const s of sockets.splice(0)) uws.us_listen_socket_close(s);
      // Replies written from async code are flushed by the event loop after the cork; closing in the
      // same tick would drop them. One loop turn lets the last replies reach the socket.
      await new Promise((resolve) => setImmediate(resolve));
      // Present in the native addon (closes every connection) but missing from its type declarations.
      (app as unknown as { close(): void }).close();
    },
    get inFlight() {
      return inFlight;
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
