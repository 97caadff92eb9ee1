// The public certificate routes on a listener of their own (SVC_PKI_PUBLICATION_ADDR), built on node:http
// because the relying parties that matter most speak HTTP/1.0: `openssl ocsp`, OpenSSL-based brokers and
// many embedded OCSP clients send `POST ... HTTP/1.0`, which the uWS build of the management listener
// never answers (uWS 20.30 does not parse HTTP/1.0). Same answers, same public_routes limit. Header and
// request timeouts bound a client that connects and sends nothing or half a request.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpErrorBody, payloadTooLarge, rateLimited, toAppError, type AppError } from '../../errors.js';
import type { RateLimiter } from '../../http/rate-limit.js';
import type { HttpReply } from '../../http/types.js';
import type { Logger } from '../../log.js';
import { OCSP_BODY_LIMIT, type PublicationHandlers } from './publication-routes.js';

const ISSUER_ROUTE = /^\/certs\/issuers\/([^/]+)\/(crl|ca\.crt|ocsp)(\/.*)?$/;

/** What the listener answers with: the publication's handlers, or the thread's stand-ins for them. */
export type ListenerHandlers = Pick<PublicationHandlers, 'trustBundle' | 'issuerCertificate' | 'crl' | 'ocspPost' | 'ocspGet'>;

export interface PublicationListener {
  listen(host: string, port: number): Promise<number>;
  close(): Promise<void>;
}

function errorOf(err: AppError): HttpReply {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(err.retryAfterSeconds)));
  return { status: err.status, headers, body: JSON.stringify(httpErrorBody(err)) };
}

/**
 * Reads the whole body up to `limit` bytes, then calls `done` from the 'end' event (no promise: a
 * synchronous answer is written in the same turn); past the limit, `tooLarge` once and the rest is ignored.
 */
function readBody(req: IncomingMessage, limit: number, done: (body: Buffer) => void, tooLarge: () => void): void {
  let first: Buffer | undefined;
  let chunks: Buffer[] | undefined;
  let size = 0;
  let refused = false;
  req.on('data', (c: Buffer) => {
    if (refused) return;
    size += c.length;
    if (size > limit) {
      refused = true;
      tooLarge();
      return;
    }
    if (first === undefined) first = c;
    else (chunks ??= [first]).push(c);
  });
  req.on('end', () => {
    if (!refused) done(chunks ? Buffer.concat(chunks, size) : (first ?? Buffer.alloc(0)));
  });
}

const EMPTY = Buffer.alloc(0);

/** The reply body as bytes, without copying bytes already in a Buffer or Uint8Array. */
function bodyBytes(body: HttpReply['body']): Buffer {
  if (body === undefined) return EMPTY;
  if (typeof body === 'string') return Buffer.from(body);
  if (Buffer.isBuffer(body)) return body;
  const bytes = body as Uint8Array;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function createPublicationListener(deps: { handlers: ListenerHandlers; limiter: RateLimiter; log: Logger }): PublicationListener {
  const { handlers: h, limiter, log } = deps;

  const replyOf = (err: unknown): HttpReply => {
    const e = toAppError(err);
    if (e.kind === 'INTERNAL') log.error('publication request failed', { err });
    return errorOf(e);
  };

  function send(req: IncomingMessage, res: ServerResponse, reply: HttpReply): void {
    if (res.destroyed) return;
    const body = bodyBytes(reply.body);
    res.writeHead(reply.status, { ...reply.headers, 'content-length': String(body.length) });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  /** Sends a reply now, or when its promise settles (an OCSP answer that needs the database or a worker). */
  function answer(req: IncomingMessage, res: ServerResponse, reply: () => HttpReply | Promise<HttpReply>): void {
    let out: HttpReply | Promise<HttpReply>;
    try {
      out = reply();
    } catch (err) {
      out = replyOf(err);
    }
    if (out instanceof Promise) out.then((r) => send(req, res, r), (err: unknown) => send(req, res, replyOf(err)));
    else send(req, res, out);
  }

  // Read once: with no limit on these routes, a request costs no address lookup (a getpeername call) and no
  // headers object.
  const limited = limiter.limits('public_routes');

  function handle(req: IncomingMessage, res: ServerResponse): void {
    if (limited) {
      const wait = limiter.hit('public_routes', req.socket.remoteAddress ?? '', req.headers as Record<string, string>);
      if (wait > 0) return send(req, res, errorOf(rateLimited(wait)));
    }
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    const method = req.method ?? 'GET';
    const get = method === 'GET' || method === 'HEAD';
    const notAllowed = (allow: string): HttpReply => ({ status: 405, headers: { 'content-type': 'application/json', allow }, body: JSON.stringify({ error: `method not allowed: ${method}; allowed: ${allow}` }) });
    if (path === '/certs/trust-bundle.pem') return answer(req, res, () => (get ? h.trustBundle() : notAllowed('GET, HEAD')));
    const m = ISSUER_ROUTE.exec(path);
    if (!m) return send(req, res, { status: 404, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: `no route for ${method} ${path}` }) });
    const issuerId = m[1] as string;
    if (m[2] === 'ocsp' && !m[3] && method === 'POST') {
      return readBody(req, OCSP_BODY_LIMIT, (body) => answer(req, res, () => h.ocspPost(issuerId, body)), () => {
        // 413, then the connection closes once it is written: the unread rest is never taken as a request.
        res.shouldKeepAlive = false;
        send(req, res, errorOf(payloadTooLarge(OCSP_BODY_LIMIT)));
      });
    }
    answer(req, res, () => {
      if (m[2] === 'ocsp') return m[3] ? (get ? h.ocspGet(issuerId, path) : notAllowed('GET, HEAD')) : notAllowed('POST');
      if (m[3] || !get) return m[3] ? { status: 404, headers: { 'content-type': 'application/json' }, body: '{"error":"not found"}' } : notAllowed('GET, HEAD');
      return m[2] === 'crl' ? h.crl(issuerId) : h.issuerCertificate(issuerId);
    });
  }

  const server: Server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }, (req, res) => {
    try {
      handle(req, res);
    } catch (err) {
      send(req, res, replyOf(err));
    }
  });
  // A malformed request line or headers: 400 and close, as node:http would, without logging noise.
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
