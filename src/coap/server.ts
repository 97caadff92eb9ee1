// CoAP ingest (RFC 7252 over UDP): POST /m/<workspace_id>/c/<channel_id>[/<subtopic>]?auth=<key> with a
// SenML JSON payload goes through the same publish pipeline as HTTP; 2.04 once stored, else the CoAP
// counterpart of the HTTP status with the reason as diagnostic payload.
import type { AddressInfo } from 'node:net';
import coap from 'coap';
import { toAppError, type AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { SENML_JSON, type Messaging } from '../messaging/index.js';
import { parsePublishTopic } from '../mqtt/index.js';
import { guardBlockUploads, type BlockLimits } from './block-guard.js';

export interface CoapServer {
  listen(host: string, port: number): Promise<number>;
  /** Stops reading datagrams after the requests in flight were answered (up to timeoutMs). */
  close(timeoutMs: number): Promise<void>;
}

// HTTP status of an AppError → CoAP response code (RFC 7252 section 12.1.2, RFC 8516 for 4.29).
const CODES: Record<number, string> = {
  400: '4.00', 401: '4.01', 403: '4.03', 404: '4.04', 405: '4.05', 409: '4.09', 413: '4.13', 415: '4.15',
  429: '4.29', 500: '5.00', 503: '5.03',
};

// Content-Formats a SenML JSON pack may arrive with (110, and generic JSON 50, which constrained clients
// often send): both are the pipeline's application/senml+json.
const CONTENT_TYPES: Record<string, string> = {
  'application/senml+json': SENML_JSON,
  'application/json': SENML_JSON,
};

type Req = InstanceType<typeof coap.IncomingMessage>;
type Res = InstanceType<typeof coap.OutgoingMessage>;

export function createCoapServer(deps: { messaging: Pick<Messaging, 'publishWithKey'>; log: Logger; blocks: BlockLimits }): CoapServer {
  const { messaging, log } = deps;
  const inFlight = new Set<Promise<void>>();
  let closing = false;

  function reply(res: Res, code: string, diagnostic?: string, maxAgeSecs?: number): void {
    res.code = code;
    if (maxAgeSecs !== undefined) res.setOption('Max-Age', maxAgeSecs);
    res.end(diagnostic);
  }

  function fail(res: Res, err: AppError): void {
    // 5.03 carries Max-Age as the retry hint (RFC 7252 section 5.9.3.4), like HTTP's Retry-After.
    const retry = err.retryAfterSeconds === undefined ? undefined : Math.max(1, Math.ceil(err.retryAfterSeconds));
    reply(res, CODES[err.status] ?? '5.00', err.message, retry);
  }

  async function handle(req: Req, res: Res): Promise<void> {
    const [path = '', query = ''] = req.url.split('?', 2);
    const topic = parsePublishTopic(path.replace(/^\/+/, ''));
    if (!topic) return reply(res, '4.04', 'no such resource: use /m/<workspace_id>/c/<channel_id>');
    if (req.method !== 'POST') return reply(res, '4.05', 'method not allowed: POST');
    if (closing) return reply(res, '5.03', 'service stopping', 1);
    const key = new URLSearchParams(query).get('auth');
    if (!key) return reply(res, '4.01', 'missing authentication: ?auth=<key>');
    const format = req.headers['Content-Format'];
    // No Content-Format: constrained clients often leave it out; the payload is read as SenML JSON.
    let contentType = SENML_JSON;
    if (format !== undefined) {
      const named = typeof format === 'string' ? CONTENT_TYPES[format] : undefined;
      if (!named) return reply(res, '4.15', 'unsupported content format: use application/senml+json (110) or application/json (50)');
      contentType = named;
    }
    try {
      await messaging.publishWithKey(key, {
        workspaceId: topic.workspaceId, channelId: topic.channelId, subtopic: topic.subtopic,
        protocol: 'coap', payload: req.payload, contentType,
      });
      reply(res, '2.04');
    } catch (err) {
      const appErr = toAppError(err);
      if (appErr.kind === 'INTERNAL') log.error('coap publish failed', { err });
      fail(res, appErr);
    }
  }

  const server = coap.createServer({ type: 'udp4' }, (req: Req, res: Res) => {
    const work = handle(req, res).catch((err: unknown) => {
      log.error('coap request failed', { err });
      try {
        reply(res, '5.00', 'internal error');
      } catch {
        // The response was already sent; nothing more to say.
      }
    });
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  });
  server.on('error', (err: Error) => log.warn('coap socket error', { err: err.message }));
  guardBlockUploads(server, deps.blocks);

  return {
    listen(host, port) {
      if (host.includes(':')) (server as unknown as { _options: { type: string } })._options.type = 'udp6';
      return new Promise((resolve, reject) => {
        server.listen(port, host, (err?: Error) => {
          if (err) return reject(err);
          const sock = (server as unknown as { _sock: { address(): AddressInfo } })._sock;
          resolve(sock.address().port);
        });
      });
    },
    async close(timeoutMs) {
      closing = true;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...inFlight]),
        new Promise((resolve) => { timer = setTimeout(resolve, timeoutMs); }),
      ]);
      clearTimeout(timer);
      // A request the package failed on (a block missing) still gets its separate empty ACK
      // piggybackReplyMs later, from a timer close() does not clear: sent on a closed socket, it would
      // throw from that timer. Those timers go off first.
      await new Promise((resolve) => setTimeout(resolve, coap.parameters.piggybackReplyMs));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
