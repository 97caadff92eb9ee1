// Live subscriptions: a WebSocket per channel on the messaging listener, fed by uWS pub/sub from the
// writer's post-commit fan-out. Authentication and the subscribe decision happen before the upgrade.
import { STATUS_CODES } from 'node:http';
import type { DeviceIdentity } from '../auth/index.js';
import { httpErrorBody, toAppError } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { HttpServer } from '../http/server.js';
import { decodePathSegment } from '../http/types.js';
import type { Logger } from '../log.js';
import { subjectOf } from './routes.js';
import type { MessagingService } from './service.js';
import type { StoredMessage } from './types.js';

interface SocketData {
  topic: string;
  channelId: string;
}

export interface LiveSettings {
  /** Bytes queued for one slow socket before it is closed (uWS closeOnBackpressureLimit). */
  maxBackpressureBytes: number;
  idleTimeoutSecs: number;
}

const topicOf = (workspaceId: string, channelId: string) => `m/${workspaceId}/c/${channelId}`;

/** The reader's message shape, so a page and a live frame read the same. */
export function toLiveMessage(m: StoredMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {
    channel: m.channel, publisher: m.publisher, protocol: m.protocol, name: m.name, unit: m.unit, time: m.time, value: m.value,
  };
  if (m.subtopic !== null) out.subtopic = m.subtopic;
  if (m.stringValue !== null) out.string_value = m.stringValue;
  if (m.boolValue !== null) out.bool_value = m.boolValue;
  if (m.dataValue !== null) out.data_value = m.dataValue;
  if (m.sum !== null) out.sum = m.sum;
  if (m.updateTime !== null && m.updateTime !== undefined) out.update_time = m.updateTime;
  return out;
}

/** Registers /ws/m/:ws/c/:ch; returns the unsubscribe from the pipeline (call it at shutdown). */
export function registerLiveRoute(server: HttpServer, messaging: MessagingService, deps: {
  authenticate: Authenticate; authenticateDeviceKey: (key: string) => Promise<DeviceIdentity | null>; log: Logger; settings: LiveSettings;
}): () => void {
  const app = server.app;
  // Channels with at least one open socket: the publish path skips serialising for everyone else.
  const watched = new Map<string, number>();

  app.ws<SocketData>('/ws/m/:ws/c/:ch', {
    maxPayloadLength: 1024,
    idleTimeout: deps.settings.idleTimeoutSecs,
    sendPingsAutomatically: true,
    maxBackpressure: deps.settings.maxBackpressureBytes,
    closeOnBackpressureLimit: 1,
    upgrade(res, req, context) {
      // The request object is gone after this callback returns: read everything now.
      const rawWorkspace = req.getParameter(0) ?? '';
      const rawChannel = req.getParameter(1) ?? '';
      const authorization = req.getHeader('authorization');
      const query = new URLSearchParams(req.getQuery() ?? '');
      const wsKey = req.getHeader('sec-websocket-key');
      const wsProtocol = req.getHeader('sec-websocket-protocol');
      const wsExtensions = req.getHeader('sec-websocket-extensions');
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      const refuse = (err: unknown) => {
        if (aborted) return;
        const e = toAppError(err);
        if (e.kind === 'INTERNAL') deps.log.error('websocket upgrade failed', { err });
        res.cork(() => {
          res.writeStatus(`${e.status} ${STATUS_CODES[e.status] ?? ''}`).writeHeader('content-type', 'application/json').end(JSON.stringify(httpErrorBody(e)));
        });
      };
      let workspaceId: string;
      let channelId: string;
      try {
        workspaceId = decodePathSegment(rawWorkspace);
        channelId = decodePathSegment(rawChannel);
      } catch (err) {
        return refuse(err);
      }
      const credentials = { authorization: authorization === '' ? undefined : authorization, token: query.get('token'), key: query.get('key') };
      subjectOf(deps.authenticate, deps.authenticateDeviceKey, credentials)
        .then((subject) => messaging.authorizeSubscribe(subject, workspaceId, channelId))
        .then(() => {
          if (aborted) return;
          // Not inside res.cork: uWS's cork() reads the HTTP response state after an asynchronous upgrade
          // from memory the WebSocket now owns and, when a bit there happens to be set, closes the new
          // socket (uWebSockets issue 1928, fixed upstream by PR 1929, not in this build). With warm caches
          // this runs in the upgrade callback's own microtasks, where uWS has the socket corked already;
          // after a database lookup uWS prints a one-line "must be corked" warning, which is harmless.
          res.upgrade<SocketData>({ topic: topicOf(workspaceId, channelId), channelId }, wsKey, wsProtocol, wsExtensions, context);
        }, refuse);
    },
    open(socket) {
      const data = socket.getUserData();
      socket.subscribe(data.topic);
      watched.set(data.channelId, (watched.get(data.channelId) ?? 0) + 1);
    },
    message() {
      // Subscriptions are read-only: what a client sends is ignored.
    },
    close(socket) {
      const { channelId } = socket.getUserData();
      const n = (watched.get(channelId) ?? 1) - 1;
      if (n <= 0) watched.delete(channelId);
      else watched.set(channelId, n);
    },
  });

  return messaging.onStored((messages, source) => {
    if (!watched.has(source.channelId)) return;
    const topic = topicOf(source.workspaceId, source.channelId);
    for (const m of messages) app.publish(topic, JSON.stringify(toLiveMessage(m)));
  });
}
