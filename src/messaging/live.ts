// Live subscriptions: a WebSocket per channel on the messaging listener, fed by uWS pub/sub from the
// writer's post-commit fan-out (and, for a watched channel, from other instances through relay.ts).
// Authentication and the subscribe decision happen before the upgrade.
import { STATUS_CODES } from 'node:http';
import type { ClientPeer } from '../auth/index.js';
import { httpErrorBody, toAppError, type AppError } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { HttpServer } from '../http/server.js';
import type { UwsWebSocket } from '../http/uws.js';
import { decodePathSegment, json } from '../http/types.js';
import type { Logger } from '../log.js';
import { subjectOf, type AuthenticateDeviceKey, type Credentials } from './routes.js';
import { refusalOf, startRevalidation } from './revalidation.js';
import type { MessagingService } from './service.js';
import { subtopicParam } from './subtopic.js';
import type { StoredMessage } from './types.js';

interface SocketData {
  /** The uWS topic: the channel's, or with ?subtopic= that subtopic's within it (exact, as the reader's filter). */
  topic: string;
  workspaceId: string;
  channelId: string;
  /** What the upgrade authenticated with, checked again every revalidateSecs. */
  credentials: Credentials;
  /** Ends this socket's watch on the channel (set when it opens). */
  unwatch?: () => void;
}

export interface LiveSettings {
  /** Bytes queued for one slow socket before it is closed (uWS closeOnBackpressureLimit). */
  maxBackpressureBytes: number;
  idleTimeoutSecs: number;
  /** Open sockets' credentials and subscribe decisions are checked again this often (0: never). */
  revalidateSecs: number;
}

/** WebSocket close codes (RFC 6455 7.4.1): the service stopping; a subscription withdrawn. */
const GOING_AWAY = 1001;
const POLICY_VIOLATION = 1008;

const LIVE_PATH = '/ws/m/:ws/c/:ch';
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

export interface LiveRoute {
  /** Closes every open socket with 1001 (going away), so clients reconnect to another instance now. */
  goingAway(): void;
  /** Stops the revalidation pass and leaves the pipeline (after goingAway, at shutdown). */
  close(): void;
}

/** Registers /ws/m/:ws/c/:ch on the messaging listener. */
export function registerLiveRoute(server: HttpServer, messaging: MessagingService, deps: {
  authenticate: Authenticate; authenticateDeviceKey: AuthenticateDeviceKey; log: Logger; settings: LiveSettings;
}): LiveRoute {
  const app = server.app;
  // Channels with at least one open socket: the publish path skips serialising for everyone else.
  const watched = new Map<string, number>();
  const sockets = new Set<UwsWebSocket<SocketData>>();

  /** Whether the socket's subscriber may still subscribe: null if so, else why not. `from`: at the upgrade. */
  const refusalFor = (data: SocketData, from?: ClientPeer) => refusalOf(
    subjectOf(deps.authenticate, deps.authenticateDeviceKey, data.credentials, from)
      .then((subject) => messaging.authorizeSubscribe(subject, data.workspaceId, data.channelId)),
    deps.log, 'live subscription');

  const revalidation = startRevalidation({
    what: 'live subscription', intervalSecs: deps.settings.revalidateSecs, log: deps.log,
    open: () => sockets,
    isOpen: (socket) => sockets.has(socket),
    refusal: (socket) => refusalFor(socket.getUserData()),
    // A close reason is at most 123 bytes; the messages are ASCII.
    end: (socket, refusal) => socket.end(POLICY_VIOLATION, refusal.message.slice(0, 120)),
    describe: (socket) => ({ channelId: socket.getUserData().channelId }),
  });

  // uWS hands a GET without the upgrade headers on to the routes: it answers 426 (RFC 9110 15.5.22).
  server.route('GET', LIVE_PATH, () => json(426, { error: 'this is a WebSocket endpoint: send the request with Upgrade: websocket' }, { upgrade: 'websocket' }));
  app.ws<SocketData>(LIVE_PATH, {
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
      const refuse = (e: AppError) => {
        if (aborted) return;
        res.cork(() => {
          res.writeStatus(`${e.status} ${STATUS_CODES[e.status] ?? ''}`).writeHeader('content-type', 'application/json').end(JSON.stringify(httpErrorBody(e)));
        });
      };
      let workspaceId: string;
      let channelId: string;
      let subtopic: string | null;
      try {
        workspaceId = decodePathSegment(rawWorkspace);
        channelId = decodePathSegment(rawChannel);
        subtopic = subtopicParam(query.get('subtopic'));
      } catch (err) {
        return refuse(toAppError(err));
      }
      const channelTopic = topicOf(workspaceId, channelId);
      const data: SocketData = {
        topic: subtopic === null ? channelTopic : `${channelTopic}/${subtopic}`, workspaceId, channelId,
        credentials: { authorization: authorization === '' ? undefined : authorization, token: query.get('token'), key: query.get('key') },
      };
      const from = { ip: Buffer.from(res.getRemoteAddressAsText()).toString() };
      void refusalFor(data, from).then((refusal) => {
        if (refusal !== null) return refuse(refusal);
        if (aborted) return;
        // Not inside res.cork: uWS's cork() reads the HTTP response state after an asynchronous upgrade
        // from memory the WebSocket now owns and, when a bit there happens to be set, closes the new
        // socket (uWebSockets issue 1928, fixed upstream by PR 1929, not in this build). With warm caches
        // this runs in the upgrade callback's own microtasks, where uWS has the socket corked already;
        // after a database lookup uWS prints a one-line "must be corked" warning, which is harmless.
        res.upgrade<SocketData>(data, wsKey, wsProtocol, wsExtensions, context);
      });
    },
    open(socket) {
      const data = socket.getUserData();
      socket.subscribe(data.topic);
      sockets.add(socket);
      data.unwatch = messaging.watch(data.channelId);
      watched.set(data.channelId, (watched.get(data.channelId) ?? 0) + 1);
    },
    message() {
      // Subscriptions are read-only: what a client sends is ignored.
    },
    close(socket) {
      sockets.delete(socket);
      const { channelId, unwatch } = socket.getUserData();
      unwatch?.();
      const n = (watched.get(channelId) ?? 1) - 1;
      if (n <= 0) watched.delete(channelId);
      else watched.set(channelId, n);
    },
  });

  const unsubscribe = messaging.onStored((messages, source) => {
    if (!watched.has(source.channelId)) return;
    const topic = topicOf(source.workspaceId, source.channelId);
    // One publish carries one subtopic: its messages also go to the sockets watching just that subtopic.
    const subtopicTopic = source.subtopic === null ? null : `${topic}/${source.subtopic}`;
    for (const m of messages) {
      const frame = JSON.stringify(toLiveMessage(m));
      app.publish(topic, frame);
      if (subtopicTopic !== null) app.publish(subtopicTopic, frame);
    }
  });
  return {
    goingAway() {
      for (const socket of [...sockets]) socket.end(GOING_AWAY, 'service stopping');
    },
    close() {
      revalidation.stop();
      unsubscribe();
    },
  };
}
