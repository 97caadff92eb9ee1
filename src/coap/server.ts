// CoAP ingest (RFC 7252 over UDP): POST /m/<workspace_id>/c/<channel_id>[/<subtopic>]?auth=<key> with a
// SenML JSON payload goes through the same publish pipeline as HTTP; 2.04 once stored, else the CoAP
// counterpart of the HTTP status with the reason as diagnostic payload. GET with Observe on the same path
// subscribes to the channel (observe.ts).
import type { AddressInfo } from 'node:net';
import coap from 'coap';
import type { ClientPeer, DeviceIdentity } from '../auth/index.js';
import { toAppError } from '../errors.js';
import type { Logger } from '../log.js';
import { SENML_JSON, type Messaging } from '../messaging/index.js';
import { parsePublishTopic } from '../mqtt/index.js';
import { answer, answerError, type Notifier, type Req, type Res } from './answer.js';
import { guardBlockUploads, type BlockLimits } from './block-guard.js';
import { createObservations, type ObserveSettings } from './observe.js';

export interface CoapServer {
  listen(host: string, port: number): Promise<number>;
  /** Observations this instance holds. */
  readonly observations: number;
  /** Requests received, and publishes stored or refused (metrics read these). */
  readonly counters: CoapCounters;
  /** Ends every observation (5.03), then stops reading datagrams after the requests in flight were answered (up to timeoutMs). */
  close(timeoutMs: number): Promise<void>;
}

export interface CoapCounters {
  requests: number;
  published: number;
  refused: number;
}

export interface CoapDeps {
  messaging: Pick<Messaging, 'publishWithKey' | 'authorizeSubscribe' | 'onStored' | 'watch'>;
  authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null>;
  log: Logger;
  blocks: BlockLimits;
  observe: ObserveSettings;
  /**
   * The encoded bytes of the answers kept to repeat them to retransmissions (the package's LRU, 247 s);
   * unset, the package's 32 MiB, which lets a flood of small answers hold GBs of heap.
   */
  responseCacheBytes?: number;
}

// Content-Formats a SenML JSON pack may arrive with (110, and generic JSON 50, which constrained clients
// often send): both are the pipeline's application/senml+json.
const CONTENT_TYPES: Record<string, string> = {
  'application/senml+json': SENML_JSON,
  'application/json': SENML_JSON,
};

export function createCoapServer(deps: CoapDeps): CoapServer {
  const { messaging, log } = deps;
  const inFlight = new Set<Promise<void>>();
  let closing = false;
  const counters: CoapCounters = { requests: 0, published: 0, refused: 0 };
  const observations = createObservations({ messaging, authenticateDeviceKey: deps.authenticateDeviceKey, settings: deps.observe, log });

  async function handle(req: Req, res: Res | Notifier): Promise<void> {
    const [path = '', query = ''] = req.url.split('?', 2);
    const topic = parsePublishTopic(path.replace(/^\/+/, ''));
    if (!topic) return answer(res, '4.04', 'no such resource: use /m/<workspace_id>/c/<channel_id>');
    const observe = req.method === 'GET' ? req.headers.Observe : undefined;
    // Observe: 1 names an observation by its endpoint and token alone (RFC 7641 3.6), no key needed.
    if (observe === 1) return observations.deregister(req, res as Res);
    if (req.method !== 'POST' && observe !== 0) return answer(res, '4.05', 'method not allowed: POST, or GET with Observe');
    if (closing) return answer(res, '5.03', 'service stopping', 1);
    const key = new URLSearchParams(query).get('auth');
    if (!key) return answer(res, '4.01', 'missing authentication: ?auth=<key>');
    if (observe === 0) return observations.register(req, res as Notifier, { ...topic, subtopic: topic.subtopic ?? null }, key);
    const format = req.headers['Content-Format'];
    // No Content-Format: constrained clients often leave it out; the payload is read as SenML JSON.
    let contentType = SENML_JSON;
    if (format !== undefined) {
      const named = typeof format === 'string' ? CONTENT_TYPES[format] : undefined;
      if (!named) return answer(res, '4.15', 'unsupported content format: use application/senml+json (110) or application/json (50)');
      contentType = named;
    }
    try {
      await messaging.publishWithKey(key, {
        workspaceId: topic.workspaceId, channelId: topic.channelId, subtopic: topic.subtopic,
        protocol: 'coap', payload: req.payload, contentType,
      }, { ip: req.rsinfo.address });
      counters.published++;
      answer(res, '2.04');
    } catch (err) {
      counters.refused++;
      const appErr = toAppError(err);
      if (appErr.kind === 'INTERNAL') log.error('coap publish failed', { err });
      answerError(res, appErr);
    }
  }

  const server = coap.createServer({ type: 'udp4', cacheSize: deps.responseCacheBytes }, (req: Req, res: Res | Notifier) => {
    // A response the package cannot send (too large, the socket gone) is an 'error' event on it: logged,
    // never an uncaught exception; an observation's stream then ends, which forgets it.
    res.on('error', (err: Error) => log.debug('coap response failed', { err: err.message }));
    counters.requests++;
    const work = handle(req, res).catch((err: unknown) => {
      log.error('coap request failed', { err });
      try {
        answer(res, '5.00', 'internal error');
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
    get observations() {
      return observations.size;
    },
    counters,
    async close(timeoutMs) {
      closing = true;
      observations.close();
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
