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

export interface PublicationListener {
  listen(host: string, port: number): Promise<number>;
  close(): Promise<void>;
}

function errorOf(err: AppError): HttpReply {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(err.retryAfterSeconds)));
  return { status: err.status, headers, body: JSON.stringify(httpErrorBody(err)) };
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(payloadTooLarge(limit));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size)));
    req.on('error', reject);
  });
}

export function createPublicationListener(deps: { handlers: PublicationHandlers; limiter: RateLimiter; log: Logger }): PublicationListener {
  const { handlers: h, limiter, log } = deps;

  async function route(req: IncomingMessage): Promise<HttpReply> {
    const path = (req.url ?? '/').split('?')[0] as string;
    const method = req.method ?? 'GET';
    const get = method === 'GET' || method === 'HEAD';
    const notAllowed = (allow: string): HttpReply => ({ status: 405, headers: { 'content-type': 'application/json', allow }, body: JSON.stringify({ error: `method not allowed: ${method}; allowed: ${allow}` }) });
    if (path === '/certs/trust-bundle.pem') return get ? h.trustBundle() : notAllowed('GET, HEAD');
    const m = ISSUER_ROUTE.exec(path);
    if (!m) return { status: 404, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: `no route for ${method} ${path}` }) };
    const issuerId = m[1] as string;
    if (m[2] === 'ocsp') {
      if (m[3]) return get ? h.ocspGet(issuerId, path) : notAllowed('GET, HEAD');
      return method === 'POST' ? h.ocspPost(issuerId, await readBody(req, OCSP_BODY_LIMIT)) : notAllowed('POST');
    }
    if (m[3] || !get) return m[3] ? { status: 404, headers: { 'content-type': 'application/json' }, body: '{"error":"not found"}' } : notAllowed('GET, HEAD');
    return m[2] === 'crl' ? h.crl(issuerId) : h.issuerCertificate(issuerId);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let reply: HttpReply;
    try {
      const wait = limiter.hit('public_routes', req.socket.remoteAddress ?? '', req.headers as Record<string, string>);
      reply = wait > 0 ? errorOf(rateLimited(wait)) : await route(req);
    } catch (err) {
      const e = toAppError(err);
      if (e.kind === 'INTERNAL') log.error('publication request failed', { err });
      reply = errorOf(e);
    }
    if (res.destroyed) return;
    const body = reply.body === undefined ? Buffer.alloc(0) : Buffer.from(reply.body as string | Uint8Array);
    res.writeHead(reply.status, { ...reply.headers, 'content-length': String(body.length) });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  const server: Server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }, (req, res) => {
    void handle(req, res);
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
