// The enrollment listener (SVC_PKI_ENROLLMENT_*): node:https, because the routes need the client
// certificate presented in the handshake, which uWS cannot show. Client certificates are requested naming
// only the active roots as acceptable CAs (never every tenant's CA: the list is capped at 64 KiB), and not
// required: the routes that need one verify it with the service's client-certificate verifier
// (src/pki/client-certificates.ts: records, issuer, revocation) and answer why it was refused. Connections
// are capped overall and per client address before the handshake starts; handshakes, headers, requests and
// idle connections are cut at their timeouts, so a slow client holds its slot no longer than those.
import { constants, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { randomUUID } from 'node:crypto';
import type { Auth } from '../../auth/index.js';
import type { NotifyHub } from '../../db/notify-hub.js';
import { AppError, isUnexpected, payloadTooLarge, rateLimited, toAppError } from '../../errors.js';
import type { RateLimiter } from '../../http/rate-limit.js';
import type { Logger } from '../../log.js';
import type { ClientCertificates, Pki } from '../index.js';
import { CHANGED_TOPIC } from '../authorities/registry.js';
import { createConnectionCaps, createEnrollmentRates } from './limits.js';
import { createEnrollmentRoutes, type EnrollReply, type EnrollRequest } from './routes.js';
import type { PeerCertificate } from './subjects.js';

export interface EnrollmentSettings {
  tlsCertPath?: string | undefined;
  tlsKeyPath?: string | undefined;
  maxCsrBytes: number;
  entityRateLimit: number;
  entityRateWindowSecs: number;
  tenantRateLimit: number;
  tenantRateWindowSecs: number;
  maxConnections: number;
  maxConnectionsPerIp: number;
  headerTimeoutSecs: number;
  requestTimeoutSecs: number;
  keepAlive: boolean;
  handshakeTimeoutSecs: number;
  connectionTimeoutSecs: number;
  shutdownDrainTimeoutSecs: number;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

function readListenerFile(path: string | undefined, setting: string): Buffer {
  if (!path) throw new Error(`${setting} is required when SVC_PKI_ENROLLMENT_ENABLED=true`);
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${setting}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

export function createEnrollmentListener(deps: {
  settings: EnrollmentSettings; rateLimitsEnabled: boolean; generatedKeyIssuance: boolean;
  pki: Pki; auth: Auth; limiter: RateLimiter; hub: NotifyHub; log: Logger; clientCertificates: ClientCertificates;
}) {
  const { settings: s, pki, limiter, log } = deps;
  const cert = readListenerFile(s.tlsCertPath, 'SVC_PKI_ENROLLMENT_TLS_CERT_PATH');
  const key = readListenerFile(s.tlsKeyPath, 'SVC_PKI_ENROLLMENT_TLS_KEY_PATH');
  try {
    new X509Certificate(cert);
  } catch {
    throw new Error(`SVC_PKI_ENROLLMENT_TLS_CERT_PATH: ${s.tlsCertPath} holds no PEM certificate`);
  }
  const caps = createConnectionCaps(s.maxConnections, s.maxConnectionsPerIp);
  const rates = createEnrollmentRates({ ...s, enabled: deps.rateLimitsEnabled });
  const routes = createEnrollmentRoutes({
    pki, auth: deps.auth, rates, maxCsrBytes: s.maxCsrBytes, generatedKeyIssuance: deps.generatedKeyIssuance, clientCertificates: deps.clientCertificates,
  });
  // A CSR travels as PEM inside JSON or as base64: both are larger than the CSR itself, which is checked exactly.
  const bodyLimit = s.maxCsrBytes * 2 + 4096;
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let accepting = true;

  /** Session tickets re-parse the client certificate on every handshake; clients here do not resume. */
  const contextOptions = (ca: string) => ({ key, cert, ca, secureOptions: constants.SSL_OP_NO_TICKET, minVersion: 'TLSv1.2' as const });

  /** The acceptable client CAs: the active roots. Which certificate is good is the verifier's decision, not OpenSSL's. */
  async function anchorsPem(): Promise<string> {
    const roots = await deps.clientCertificates.anchorsPem();
    // Never an empty list: Node would then use its public roots. With no authority, this listener's own certificate.
    return roots || cert.toString('utf8');
  }

  let anchors = '';
  let reloading: Promise<void> | undefined;
  let again = false;
  function reloadTrust(): void {
    if (reloading) {
      again = true;
      return;
    }
    reloading = (async () => {
      do {
        again = false;
        const pem = await anchorsPem();
        // Authority changes are mostly tenant CAs, which change nothing here: the context is rebuilt only when the roots do.
        if (pem !== anchors) server?.setSecureContext(contextOptions(pem));
        anchors = pem;
      } while (again);
    })().catch((err: unknown) => log.warn('reloading the enrollment listener\'s roots failed; the previous ones stay', { err: String(err) }))
      .finally(() => { reloading = undefined; });
  }
  const unsubscribe = deps.hub.subscribe(CHANGED_TOPIC, reloadTrust);
  const unsubscribeReconnect = deps.hub.onReconnect(reloadTrust);
  // Roots expire over time, without a change being announced.
  const periodic = setInterval(reloadTrust, 300_000);
  periodic.unref();

  function peerOf(req: IncomingMessage): PeerCertificate | null {
    const socket = req.socket as TLSSocket;
    const x509 = socket.getPeerX509Certificate?.();
    if (!x509) return null;
    const reason = socket.authorizationError as unknown;
    const error = reason ? String((reason as { code?: string }).code ?? reason) : null;
    return { der: x509.raw, authorized: socket.authorized, error };
  }

  function send(res: ServerResponse, requestId: string, reply: EnrollReply): void {
    if (res.headersSent) return;
    res.statusCode = reply.status;
    res.setHeader('x-request-id', requestId);
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    if (!s.keepAlive) res.setHeader('connection', 'close');
    res.end(reply.body);
  }

  function errorReply(thrown: unknown, requestId: string): EnrollReply {
    // The one translation every edge uses: a database failure (a killed backend, a refused connection)
    // is UNAVAILABLE, 503 with Retry-After, as GraphQL answers it; only what is unexpected is a 500.
    const err = toAppError(thrown);
    if (isUnexpected(err)) {
      log.error('enrollment request failed', { requestId, err: thrown });
      return { status: 500, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'internal error' }) };
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
    const challenge = err.details?.challenge;
    if (err.kind === 'UNAUTHENTICATED' && typeof challenge === 'string') headers['www-authenticate'] = challenge;
    return { status: err.status, headers, body: JSON.stringify({ error: err.message }) };
  }

  function readBody(req: IncomingMessage): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const declared = Number(req.headers['content-length'] ?? 0);
      if (declared > bodyLimit) {
        reject(payloadTooLarge(bodyLimit));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > bodyLimit) {
          reject(payloadTooLarge(bodyLimit));
          req.removeAllListeners('data');
          req.resume();
          return;
        }
        chunks.push(chunk);
      });
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    try {
      const headers = req.headers as Record<string, string>;
      const wait = limiter.hit('enrollment', req.socket.remoteAddress ?? '', headers);
      if (wait > 0) throw rateLimited(wait);
      const path = (req.url ?? '/').split('?')[0]!;
      const route = routes.find(path);
      if (!route) throw new AppError('NOT_FOUND', `no enrollment route ${path.slice(0, 100)}`);
      if (req.method !== route.method) throw new AppError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${path}: use ${route.method}`);
      const body = route.method === 'POST' ? await readBody(req) : Buffer.alloc(0);
      const ip = limiter.clientIp(req.socket.remoteAddress ?? '', headers);
      const request: EnrollRequest = { method: req.method, path, headers, body, requestId, peer: peerOf(req), ip };
      send(res, requestId, await route.run(request));
    } catch (err) {
      // A client that went away mid-request is not the service's failure: nothing to answer, nothing to alarm anyone.
      // Its socket tells, not req.destroyed: Node destroys every request once its body has been read, so that
      // flag would silence any failure after the read (a database error) and leave the client without an answer.
      if (req.socket.destroyed) {
        log.debug('enrollment client went away before its answer', { requestId, code: (err as NodeJS.ErrnoException).code ?? String(err) });
        return;
      }
      const reply = errorReply(err, requestId);
      // A refused body is not read further: the connection closes after the answer.
      if (reply.status === 413) res.setHeader('connection', 'close');
      send(res, requestId, reply);
    }
  }

  return {
    async listen(host: string, port: number): Promise<number> {
      anchors = await anchorsPem();
      const created = createServer({
        ...contextOptions(anchors),
        requestCert: true,
        rejectUnauthorized: false,
        handshakeTimeout: s.handshakeTimeoutSecs * 1000,
        headersTimeout: s.headerTimeoutSecs * 1000,
        requestTimeout: s.requestTimeoutSecs * 1000,
        keepAliveTimeout: s.keepAlive ? Math.min(s.connectionTimeoutSecs, 5) * 1000 : 1,
        // Header and request timeouts are enforced by a sweep at this interval (Node's default is 30 s).
        connectionsCheckingInterval: 1000,
      }, (req, res) => void handle(req, res));
      server = created;
      created.on('connection', (socket: Socket) => {
        const address = limiter.addressKey(socket.remoteAddress ?? '');
        if (!accepting || !caps.admit(address)) {
          socket.destroy();
          return;
        }
        sockets.add(socket);
        // Idle or never-finishing connections give their slot back at SVC_PKI_ENROLLMENT_CONNECTION_TIMEOUT_SECS.
        socket.setTimeout(s.connectionTimeoutSecs * 1000, () => socket.destroy());
        socket.once('close', () => {
          sockets.delete(socket);
          caps.release(address);
        });
      });
      created.on('tlsClientError', (err: NodeJS.ErrnoException) => log.debug('enrollment handshake failed', { code: err.code ?? err.message }));
      await new Promise<void>((resolve, reject) => {
        created.once('error', reject);
        created.listen(port, host, () => {
          created.off('error', reject);
          resolve();
        });
      });
      const address = created.address();
      return typeof address === 'object' && address ? address.port : port;
    },
    /** Open connections (tests and health). */
    openConnections: () => caps.open,
    /** The routes it serves (the tenant-isolation matrix enumerates them). */
    routes: () => routes.list(),
    stopAccepting(): void {
      accepting = false;
      server?.close();
      server?.closeIdleConnections();
    },
    /** Waits for requests in flight up to the drain timeout, then cuts what is left. */
    async drain(): Promise<boolean> {
      const deadline = Date.now() + s.shutdownDrainTimeoutSecs * 1000;
      while (sockets.size > 0 && Date.now() < deadline) {
        server?.closeIdleConnections();
        await new Promise((r) => setTimeout(r, 50));
      }
      const clean = sockets.size === 0;
      for (const socket of sockets) socket.destroy();
      return clean;
    },
    async close(): Promise<void> {
      unsubscribe();
      unsubscribeReconnect();
      clearInterval(periodic);
      accepting = false;
      for (const socket of sockets) socket.destroy();
      if (server?.listening) await new Promise<void>((resolve) => server!.close(() => resolve()));
      await reloading;
    },
  };
}

export type EnrollmentListener = ReturnType<typeof createEnrollmentListener>;
