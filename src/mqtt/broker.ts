// The MQTT broker inside the service: aedes on a net listener, hooks into auth and the messaging pipeline,
// delivery of HTTP/CoAP messages (and other instances' messages) to MQTT subscribers, live counters,
// periodic re-checks, graceful stop.
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { Aedes, type AedesPublishPacket, type Client, type PublishPacket } from 'aedes';
import type { ClientPeer, DeviceIdentity } from '../auth/index.js';
import type { Authz } from '../authz/types.js';
import { unavailable } from '../errors.js';
import type { Logger } from '../log.js';
import { toResolvedSenml, type Messaging } from '../messaging/index.js';
import { releaseOnConnack } from './connack-first.js';
import { createHooks, isCounted, V5_NOT_AUTHORIZED, type DenyAction } from './hooks.js';
import { createMqttMetrics, type MqttCounters, type MqttErrors, type TrackedConnection } from './metrics.js';
import { createBrokerBackend } from './persistence.js';
import { hardenBroker, hardenClient } from './prototype-keys.js';
import { attachPublishLane } from './publish-lane.js';
import { watchSubscribedChannels } from './remote-watch.js';
import { certificateCheck, certificateRefusal, tlsPeerOptions, type CertificateCheck, type TlsPeerSettings } from './tls-peers.js';
import { channelTopic, filterMatches, parseSubscribeFilter } from './topics.js';

export interface MqttConfig {
  denyAction: DenyAction;
  /** How often connected clients' keys and subscriptions are checked again (0: never). */
  revalidateSecs: number;
  redis?: { url: string; keyPrefix: string };
  /** The aedes broker id (this node's id), so wills and $SYS topics name the node. */
  brokerId?: string;
  /** Largest MQTT packet accepted (bytes on the wire); a bigger one closes the connection at its header. */
  maxPacketBytes: number;
  /** Subscription filters one client may hold at once. */
  maxSubscriptions: number;
}

export interface MqttSnapshot {
  connections: { current: number; total: number; disconnections: number };
  messages: { received: number; sent: number; publish_received: number; publish_sent: number };
  bytes: { received: number; sent: number };
  subscriptions: { active: number; retained_messages: number };
  errors: MqttErrors;
  sessions: { connected: number; total: number };
}

/** What the broker reads and writes a client's bytes through: a TCP socket, or a WebSocket's stream. */
export type MqttConnection = Duplex & TrackedConnection;

/**
 * PEM contents of a TLS listener. Client certificates are checked by the service's verifier (src/mqtt/tls-peers.ts);
 * with clientCa, every client must present one, and one that CA signed (not the service) is accepted by chain.
 */
export interface MqttTlsOptions extends TlsPeerSettings {
  cert: Buffer;
  key: Buffer;
}

export interface MqttBroker {
  listen(host: string, port: number): Promise<number>;
  /** MQTT over TLS (mqtts): the same broker behind a TLS handshake. */
  listenTls(host: string, port: number, tls: MqttTlsOptions): Promise<number>;
  /** A connection from another transport (MQTT over WebSocket); false once the broker stops accepting. */
  accept(conn: MqttConnection): boolean;
  stopAccepting(): void;
  /** Waits (up to timeoutMs) for PUBLISHes being stored, then closes every client and the broker. */
  close(timeoutMs: number): Promise<void>;
  /** Throws UNAVAILABLE when the broker is closed or its persistence cannot be read. */
  snapshot(): Promise<MqttSnapshot>;
  readonly shared: boolean;
  /** The live counters behind snapshot() (connections, packets, PUBLISHes, refusals), read by the metrics. */
  readonly counters: MqttCounters;
  /** Socket bytes received and sent, live connections included. */
  bytes(): { received: number; sent: number };
}

export interface MqttDeps {
  auth: { authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null> };
  messaging: Pick<Messaging, 'publishAsDevice' | 'authorizeSubscribe' | 'onStored' | 'watch'>;
  authz: Pick<Authz, 'decide'>;
  log: Logger;
  config: MqttConfig;
}

interface Persistence {
  createRetainedStream(pattern: string): AsyncIterable<unknown>;
  countOffline(): Promise<{ clientsCount: number }>;
  incomingGetPacket(client: Client, packet: PublishPacket): Promise<unknown>;
}

interface LiveClient extends Client {
  subscriptions: Record<string, unknown>;
  /** True from CONNECT until the session's queue has been sent. */
  connecting: boolean;
}

/** Whether the client holds a subscription whose filter matches the topic. */
const heldBy = (client: LiveClient, topic: string) => Object.keys(client.subscriptions).some((filter) => filterMatches(filter, topic));

const RETAINED_CACHE_MS = 1000;

export async function createMqttBroker(deps: MqttDeps): Promise<MqttBroker> {
  const { log, config } = deps;
  const metrics = createMqttMetrics();
  /** Set when close() begins: from then on PUBLISHes are refused unstored, so the last PUBACKs can be flushed. */
  let closing = false;
  /** MQTT over TLS: each connection's client-certificate check, by its socket (aedes' client.conn). */
  const certificates = new WeakMap<object, CertificateCheck>();
  const hooks = createHooks({
    certificateOf: (client) => certificates.get(client.conn),
    auth: deps.auth, messaging: deps.messaging, authz: deps.authz, metrics, log,
    denyAction: config.denyAction, maxSubscriptions: config.maxSubscriptions, closing: () => closing,
    alreadyReceived: (client, packet) => persistence.incomingGetPacket(client, packet).then(() => true, () => false),
  });
  const backend = createBrokerBackend(config.redis, log);
  const broker = await Aedes.createBroker({
    ...backend.options,
    ...(config.brokerId ? { id: config.brokerId } : {}),
    // Checked once a packet's fixed header is read (MQTT 5 clients are told it in the CONNACK, and get a
    // 0x95 DISCONNECT; older ones are closed), so an oversized frame is never buffered whole.
    maximumPacketSize: config.maxPacketBytes,
    authenticate: hooks.authenticate,
    authorizePublish: hooks.authorizePublish,
    authorizeSubscribe: hooks.authorizeSubscribe,
    authorizeForward(client, packet) {
      // A resuming session's queue was filled against the subscriptions it held when it left. aedes has
      // just authorised those again (a grant withdrawn meanwhile drops the subscription) and clears from
      // the queue what this refuses: nothing queued reaches a device that may no longer subscribe to it.
      if ((client as LiveClient).connecting && !heldBy(client as LiveClient, packet.topic)) return null;
      metrics.packetOut(true);
      return packet;
    },
  });

  hardenBroker(broker);

  // A PUBLISH refused under the 'ignore' action was acknowledged by aedes; it must go no further.
  const publish = broker.publish.bind(broker) as unknown as (packet: AedesPublishPacket, client: Client | null, done: (err?: Error) => void) => void;
  (broker as unknown as { publish: typeof publish }).publish = (packet, client, done) => {
    if (typeof client === 'function') return publish(packet, null, client);
    if (client && packet.qos > 0) metrics.packetOut(false); // the PUBACK or PUBREC aedes writes next
    if (hooks.isDropped(packet)) return done?.();
    publish(packet, client, done);
  };

  // MQTT 3.1/3.1.1 clients' PUBLISHes are cut from their frames once connected (publish-lane.ts); the
  // lane calls the same hook and forwards through aedes' own publish (its PUBACKs it counts itself).
  const laneDeps = {
    authorizePublish: hooks.authorizePublish, isDropped: hooks.isDropped, maxPacketBytes: config.maxPacketBytes,
    maxTopicLevels: (broker as unknown as { maxTopicLevels: number }).maxTopicLevels,
    packetIn: metrics.packetIn, packetOut: metrics.packetOut,
    forward(packet: PublishPacket, client: Client) {
      publish(packet as AedesPublishPacket, client, (err?: Error) => {
        if (err) log.warn('mqtt forward failed', { err: err.message });
      });
    },
  };
  broker.on('clientReady', (client) => {
    if (!closing) attachPublishLane(client, laneDeps);
  });
  broker.on('client', () => metrics.counters.connectionsTotal++);
  broker.on('clientDisconnect', () => metrics.counters.disconnections++);
  broker.on('connackSent', () => metrics.packetOut(false));
  releaseOnConnack(broker);
  // A retained PUBLISH changes the count: the next snapshot reads it afresh.
  broker.on('publish', (packet) => {
    if (packet.retain) retained.at = 0;
  });
  broker.on('connectionError', (_client, err) => countClientError(err));
  broker.on('clientError', (_client, err) => countClientError(err));

  function countClientError(err: Error): void {
    if (isCounted(err)) return;
    const m = err.message ?? '';
    if (/not allowed in PUBLISH|empty topic|too many levels|queue limit|maxInflightInbound|Invalid topic/i.test(m)) metrics.counters.errors.packet++;
    else if (/protocol|connect did not arrive|Invalid|Malformed|not supported/i.test(m)) metrics.counters.errors.protocol++;
  }

  // HTTP and CoAP messages reach MQTT subscribers of their channel; MQTT ones were forwarded by aedes.
  // Another instance's messages, of any protocol, come through Redis when the broker shares it (that
  // instance's broker published them to every instance's subscribers); without it, through the relay,
  // which sends them here because the subscriptions are watched. One PUBLISH per publish either way.
  const stopWatching = backend.shared ? () => undefined : watchSubscribedChannels(broker, deps.messaging.watch);
  // aedes gives the session store every filter of a SUBSCRIBE each time one of them is granted, refused
  // ones included: only the granted are stored (and, this wrapper being outermost, watched), so a refused
  // filter neither lives in a persistent session nor costs relay traffic.
  const store = (broker as unknown as { persistence: { addSubscriptions(client: Client, subs: { topic: string }[]): Promise<void> } }).persistence;
  const addSubscriptions = store.addSubscriptions.bind(store);
  store.addSubscriptions = (client, subs) => {
    const granted = subs.filter((sub) => hooks.granted(client, sub.topic));
    return granted.length > 0 ? addSubscriptions(client, granted) : Promise.resolve();
  };
  broker.on('subscribe', (subs, client) => hooks.subscribed(client, subs.map((sub) => sub.topic)));
  broker.on('unsubscribe', (topics, client) => hooks.subscribed(client, topics));
  const stopFanOut = deps.messaging.onStored((messages, source) => {
    const first = messages[0];
    if (!first || broker.closed || (source.remote === true ? backend.shared : first.protocol === 'mqtt')) return;
    broker.publish({
      cmd: 'publish', topic: channelTopic(source.workspaceId, source.channelId, source.subtopic),
      payload: Buffer.from(JSON.stringify(toResolvedSenml(messages))), qos: 1, retain: false, dup: false,
    }, (err?: Error) => {
      if (err) log.warn('mqtt fan-out failed', { err: err.message });
    });
  });

  let retained = { count: 0, at: 0 };
  /** A client connection, over TCP or WebSocket: the same broker, hooks, limits and counters. */
  function accept(conn: MqttConnection): void {
    metrics.trackSocket(conn);
    const client = broker.handle(conn as unknown as net.Socket) as Client & { _parser?: NodeJS.EventEmitter };
    hardenClient(client);
    // The parser is aedes-internal (pinned version): the only place every inbound packet passes.
    client._parser?.on('packet', (packet: { cmd: string }) => metrics.packetIn(packet));
    client._parser?.on('error', () => metrics.counters.errors.protocol++);
  }
  let accepting = true;

  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    accept(socket);
  });
  let tlsServer: tls.Server | undefined;

  function bind(listener: net.Server, host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(port, host, () => {
        listener.off('error', reject);
        resolve((listener.address() as net.AddressInfo).port);
      });
    });
  }

  const revalidate = config.revalidateSecs > 0 ? setInterval(() => void revalidateClients(), config.revalidateSecs * 1000) : undefined;
  revalidate?.unref();

  /** Keys revoked and grants withdrawn while connected: such clients are closed (they may reconnect). */
  async function revalidateClients(): Promise<void> {
    const clients = Object.values((broker as unknown as { clients: Record<string, LiveClient> }).clients);
    for (const client of clients) {
      const key = hooks.keyOf(client);
      if (!key || client.closed) continue;
      try {
        const identity = await deps.auth.authenticateDeviceKey(key);
        let ok = identity !== null && identity.status === 'active' && identity.entityId === hooks.identityOf(client)?.entityId;
        const certificate = hooks.certificateOf(client);
        if (ok && certificate && identity) ok = certificateRefusal(await certificate(), identity.entityId) === null;
        for (const topic of Object.keys(client.subscriptions)) {
          const filter = parseSubscribeFilter(topic);
          if (!ok || !filter || !identity) break;
          ok = await deps.messaging.authorizeSubscribe({ device: identity }, filter.workspaceId, filter.channelId).then(() => true, () => false);
        }
        if (!ok) {
          log.info('mqtt client closed: key, certificate or subscription no longer allowed', { clientId: client.id });
          // MQTT 5 clients get a DISCONNECT saying why; older ones are closed.
          client.disconnect({ reasonCode: V5_NOT_AUTHORIZED });
        }
      } catch (err) {
        log.warn('mqtt revalidation skipped', { err });
      }
    }
  }

  // Persistence is an aedes field its type declarations leave out.
  const persistence = (broker as unknown as { persistence: Persistence }).persistence;
  async function countRetained(): Promise<number> {
    if (Date.now() - retained.at < RETAINED_CACHE_MS) return retained.count;
    let count = 0;
    const stream = persistence.createRetainedStream('#');
    for await (const _ of stream) count++;
    retained = { count, at: Date.now() };
    return count;
  }

  return {
    shared: backend.shared,
    listen(host, port) {
      return bind(server, host, port);
    },
    async listenTls(host, port, options) {
      const mutual = options.clientCa !== undefined;
      tlsServer = tls.createServer({ cert: options.cert, key: options.key, ...(await tlsPeerOptions(options)), minVersion: 'TLSv1.2' }, (socket) => {
        // With an operator's client CA a certificate is mandatory: refused before any MQTT is read.
        if (mutual && !socket.getPeerX509Certificate()) return void socket.destroy();
        const certificate = certificateCheck(socket, options);
        if (certificate) certificates.set(socket, certificate);
        socket.setNoDelay(true);
        accept(socket);
      });
      // A failed handshake (plaintext, an unknown client certificate) never reaches the broker.
      tlsServer.on('tlsClientError', () => metrics.counters.errors.protocol++);
      return bind(tlsServer, host, port);
    },
    accept(conn) {
      if (!accepting || closing) return false;
      accept(conn);
      return true;
    },
    stopAccepting() {
      accepting = false;
      if (server.listening) server.close();
      if (tlsServer?.listening) tlsServer.close();
    },
    async close(timeoutMs) {
      closing = true;
      accepting = false;
      if (server.listening) server.close();
      if (tlsServer?.listening) tlsServer.close();
      if (revalidate) clearInterval(revalidate);
      let timer: NodeJS.Timeout | undefined;
      const settled = await Promise.race([
        hooks.settle().then(() => true),
        new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs); }),
      ]);
      clearTimeout(timer);
      if (!settled) log.warn('mqtt: publishes still being stored at shutdown; their clients get no PUBACK and will resend');
      // PUBACKs of the last answers are written on the next turns of the loop; closing a socket drops what
      // it has not flushed, and an unacknowledged message is resent (a duplicate), so let them go out.
      await new Promise((resolve) => setTimeout(resolve, 50));
      stopFanOut();
      // MQTT 3.1.1 has no server DISCONNECT: closing the connection is the graceful end; persistent sessions stay.
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      stopWatching();
      await backend.close();
    },
    counters: metrics.counters,
    bytes: () => metrics.bytes(),
    async snapshot() {
      if (broker.closed) throw unavailable('broker not available');
      const clients = Object.values((broker as unknown as { clients: Record<string, LiveClient> }).clients);
      let active = 0;
      let clean = 0;
      for (const c of clients) {
        active += Object.keys(c.subscriptions).length;
        if (c.clean) clean++;
      }
      let retainedMessages: number;
      let persistent: number;
      try {
        retainedMessages = await countRetained();
        persistent = (await persistence.countOffline()).clientsCount;
      } catch (err) {
        log.warn('mqtt persistence unreadable', { err });
        throw unavailable('broker not available', 1);
      }
      const { counters } = metrics;
      const current = counters.connectionsTotal - counters.disconnections;
      return {
        connections: { current, total: counters.connectionsTotal, disconnections: counters.disconnections },
        messages: { received: counters.packetsReceived, sent: counters.packetsSent, publish_received: counters.publishReceived, publish_sent: counters.publishSent },
        bytes: metrics.bytes(),
        subscriptions: { active, retained_messages: retainedMessages },
        errors: { ...counters.errors },
        // Sessions: every connected client plus the persistent sessions the store holds (online or not).
        sessions: { connected: clients.length, total: clean + persistent },
      };
    },
  };
}
