// aedes hooks: CONNECT with a device's shared key, PUBLISH stored through the messaging pipeline before
// it is acknowledged or forwarded, SUBSCRIBE per filter within one channel the device may subscribe to.
import type { AuthenticateError, Client, PublishPacket, Subscription } from 'aedes';
import { principalOfDevice, type ClientPeer, type DeviceIdentity } from '../auth/index.js';
import type { Authz } from '../authz/types.js';
import { isTransient, toAppError, type AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { mediaTypeOf, SENML_JSON, type Messaging } from '../messaging/index.js';
import { holdDeliveriesUntilConnack } from './connack-first.js';
import type { MqttMetrics } from './metrics.js';
import { certificateRefusal, type CertificateCheck } from './tls-peers.js';
import { parsePublishTopic, parseSubscribeFilter, type ChannelTopic } from './topics.js';

export type DenyAction = 'ignore' | 'disconnect';

interface Session {
  identity: DeviceIdentity;
  key: string;
  /** MQTT over TLS with a client certificate: checked again with the key (a revocation ends the session). */
  certificate: CertificateCheck | undefined;
  /** When the key was last confirmed (Date.now()). */
  checkedAt: number;
  /** Parsed publish topics: a device publishes to a handful of topics over and over. */
  topics: Map<string, ChannelTopic | null>;
  /** Settles when every earlier PUBLISH of this client has been answered: keeps PUBACKs in order. */
  tail: Promise<void>;
  /**
   * Filters of SUBSCRIBEs not completed yet, being decided or granted. aedes decides every filter of a
   * packet at once, before adding any: counted with those held, they keep a packet of many filters
   * within the bound; and the session store is given only the granted ones.
   */
  filters: Map<string, 'deciding' | 'granted'>;
}

export interface HookDeps {
  auth: { authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null> };
  messaging: Pick<Messaging, 'publishAsDevice' | 'authorizeSubscribe'>;
  authz: Pick<Authz, 'decide'>;
  metrics: MqttMetrics;
  log: Logger;
  denyAction: DenyAction;
  /** Subscription filters one client may hold at once: each is kept in the broker and its session store. */
  maxSubscriptions: number;
  /**
   * True once the broker is closing: PUBLISHes are refused without being stored (the connection closes, the
   * client resends elsewhere), and wills are not published for connections we close ourselves.
   */
  closing(): boolean;
  /** A QoS 2 PUBLISH aedes already holds (a DUP resent before our PUBREC arrived): stored already. */
  alreadyReceived(client: Client, packet: PublishPacket): Promise<boolean>;
  /** The check of the client certificate the connection presented over TLS, if any. */
  certificateOf?(client: Client): CertificateCheck | undefined;
}

// CONNACK return codes of MQTT 3.1.1 (3.2.2.3); aedes maps them to MQTT 5 reason codes (0x88, 0x86, 0x87).
const SERVER_UNAVAILABLE = 3;
const BAD_USERNAME_OR_PASSWORD = 4;
const NOT_AUTHORIZED = 5;
// MQTT 5 DISCONNECT reason codes (3.14.2.1).
export const V5_NOT_AUTHORIZED = 0x87;
const V5_SERVER_SHUTTING_DOWN = 0x8b;
const V5_SERVER_BUSY = 0x89;
const V5_PAYLOAD_FORMAT_INVALID = 0x99;

/** Staleness bound for a connected client's key and device status on the publish path. */
export const KEY_RECHECK_MS = 1000;
const TOPIC_CACHE = 64;

const PACKET = new Set(['INVALID_INPUT', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE']);

/**
 * What the payload is: MQTT 5's Content Type when the publisher states one (plain JSON read as SenML
 * JSON, as CoAP's format 50 is), else SenML JSON, the topic's format (3.1.1 cannot say). Any other stated
 * type is refused by the pipeline instead of being misread as JSON.
 */
function contentTypeOf(packet: PublishPacket): string {
  const stated = packet.properties?.contentType;
  if (stated === undefined) return SENML_JSON;
  // Media types are case-insensitive and may carry parameters ('application/JSON; charset=utf-8').
  return mediaTypeOf(stated) === 'application/json' ? SENML_JSON : stated;
}

function connectError(returnCode: number, message: string): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}

export function createHooks(deps: HookDeps) {
  const { auth, messaging, metrics, log } = deps;
  const sessions = new WeakMap<Client, Session>();
  /** PUBLISHes refused under the 'ignore' action: acknowledged by aedes, never stored or forwarded. */
  const dropped = new WeakSet<object>();
  const inFlight = new Set<Promise<unknown>>();

  function authenticate(client: Client, username: string | undefined, password: Buffer | undefined,
    done: (err: AuthenticateError | null, ok: boolean | null) => void): void {
    if (!username || !password || password.length === 0) {
      metrics.counters.errors.auth++;
      return done(connectError(BAD_USERNAME_OR_PASSWORD, 'username and password (the shared key) are required'), false);
    }
    const key = password.toString('utf8');
    // TCP and TLS sockets know their peer; MQTT over WebSocket streams carry it as remoteAddress too.
    const from = { ip: (client.conn as { remoteAddress?: string }).remoteAddress ?? '' };
    const certificate = deps.certificateOf?.(client);
    Promise.all([auth.authenticateDeviceKey(key, from), certificate?.() ?? null]).then(([identity, verdict]) => {
      if (!identity || identity.entityId.toLowerCase() !== username.toLowerCase()) {
        metrics.counters.errors.auth++;
        return done(connectError(BAD_USERNAME_OR_PASSWORD, 'bad username or password'), false);
      }
      if (identity.status !== 'active') {
        metrics.counters.errors.auth++;
        return done(connectError(NOT_AUTHORIZED, 'device is not active'), false);
      }
      // A certificate the service issued binds the connection to its entity: another device's key is refused.
      const refused = verdict && certificateRefusal(verdict, identity.entityId);
      if (refused) {
        metrics.counters.errors.auth++;
        return done(connectError(NOT_AUTHORIZED, refused), false);
      }
      // Client ids are chosen by clients, and MQTT lets a CONNECT with a taken id take over that session
      // (its subscriptions and queued messages). Scoping the id by the authenticated device keeps one
      // device from reaching another's session; aedes reads client.id only after this hook.
      (client as { id: string }).id = `${identity.entityId}/${client.id}`;
      sessions.set(client, { identity, key, certificate, checkedAt: Date.now(), topics: new Map(), tail: Promise.resolve(), filters: new Map() });
      holdDeliveriesUntilConnack(client);
      done(null, true);
    }, (err: unknown) => {
      log.warn('mqtt authentication unavailable', { err });
      done(connectError(SERVER_UNAVAILABLE, 'server unavailable'), false);
    });
  }

  /**
   * Stores the message (resolves after its batch committed) before aedes may acknowledge or forward it.
   * Refusals that retrying cannot fix are acknowledged and dropped under 'ignore' (MQTT-3.3.5-2 allows a
   * positive acknowledgement or closing the connection); failures that retrying can fix (database down,
   * queue full) always close the connection without a PUBACK, so the client sends the message again.
   */
  function authorizePublish(client: Client | null, packet: PublishPacket, done: (err?: Error | null) => void): void {
    if (!client) return done(null);
    const session = sessions.get(client);
    if (!session) return done(new Error('not authenticated'));
    if (deps.closing()) {
      // Not a refusal: the message goes unacknowledged, so the client sends it again elsewhere.
      const stopping = new Error('service stopping');
      return isV5(client) ? disconnect(client, V5_SERVER_SHUTTING_DOWN, stopping, done) : done(stopping);
    }
    const work = packet.qos === 2 && packet.dup
      ? deps.alreadyReceived(client, packet).then((seen) => (seen ? undefined : publish(session, packet)))
      : publish(session, packet);
    inFlight.add(work);
    // aedes handles a read chunk's packets concurrently; answering in arrival order keeps PUBACKs ordered.
    const prev = session.tail;
    const settled = work.then(() => undefined, () => undefined);
    session.tail = prev.then(() => settled);
    session.tail.then(() => {
      inFlight.delete(work);
      work.then(() => done(null), (err: Error) => refuse(client, packet, err, done));
    }, () => undefined);
  }

  /**
   * authorizePublish for the framed path (publish-lane.ts), which keeps its answers in order itself and
   * serves only MQTT 3.1/3.1.1 clients: no per-client promise chain per message.
   */
  function publishFramed(client: Client, packet: PublishPacket, done: (err?: Error | null) => void): void {
    const session = sessions.get(client);
    if (!session) return done(new Error('not authenticated'));
    // Not a refusal: the message goes unacknowledged, so the client sends it again elsewhere.
    if (deps.closing()) return done(new Error('service stopping'));
    const work = publish(session, packet);
    inFlight.add(work);
    work.then(() => {
      inFlight.delete(work);
      done(null);
    }, (err: Error) => {
      inFlight.delete(work);
      refuse(client, packet, err, done);
    });
  }

  async function publish(session: Session, packet: PublishPacket): Promise<void> {
    let topic = session.topics.get(packet.topic);
    if (topic === undefined) {
      if (session.topics.size >= TOPIC_CACHE) session.topics.clear();
      session.topics.set(packet.topic, (topic = parsePublishTopic(packet.topic)));
    }
    if (!topic) throw Object.assign(new Error(`topic '${packet.topic}' is not m/<workspace_id>/c/<channel_id>[/<subtopic>]`), { refusal: 'authz' });
    // The key is confirmed again (a cached lookup, invalidated by NOTIFY on revocation) at most every
    // KEY_RECHECK_MS: a revoked key or disabled device stops publishing within that bound, and a burst of
    // PUBLISHes does not hash the key once per message.
    let identity = session.identity;
    const now = Date.now();
    if (now - session.checkedAt >= KEY_RECHECK_MS) {
      const current = await auth.authenticateDeviceKey(session.key);
      if (!current || current.entityId !== session.identity.entityId) {
        throw Object.assign(new Error('shared key no longer valid'), { refusal: 'auth' });
      }
      const refused = session.certificate && certificateRefusal(await session.certificate(), current.entityId);
      if (refused) throw Object.assign(new Error(refused), { refusal: 'auth' });
      session.identity = identity = current;
      session.checkedAt = now;
    }
    if (packet.retain && packet.payload.length === 0) return clearRetained(identity, topic);
    await messaging.publishAsDevice(identity, {
      workspaceId: topic.workspaceId, channelId: topic.channelId, subtopic: topic.subtopic,
      protocol: 'mqtt', payload: Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload), contentType: contentTypeOf(packet),
    });
  }

  /** An empty retained PUBLISH stores nothing and deletes the topic's retained message: publish right needed. */
  async function clearRetained(identity: DeviceIdentity, topic: ChannelTopic): Promise<void> {
    if (identity.tenantId !== topic.workspaceId) throw Object.assign(new Error('forbidden'), { refusal: 'authz' });
    const decision = await deps.authz.decide(principalOfDevice(identity), 'publish', { kind: 'resource', id: topic.channelId });
    if (!decision.allowed) throw Object.assign(new Error('forbidden'), { refusal: 'authz' });
  }

  /**
   * MQTT 3.1.1 has no negative PUBACK: a refusal is either acknowledged and dropped ('ignore') or the
   * connection is closed. MQTT 5 can say why: under 'ignore' aedes answers 0x87 (with the reason as its
   * Reason String) and keeps the connection; where the connection must go, a DISCONNECT carries the
   * reason code first. A transient failure never gets a PUBACK, so the client sends the message again.
   */
  function refuse(client: Client, packet: PublishPacket, err: Error, done: (err?: Error | null) => void): void {
    const kind = classify(err);
    const v5 = isV5(client);
    if (kind === 'transient') {
      log.warn('mqtt publish not stored; closing the connection so the client retries', { err: err.message });
      return v5 ? disconnect(client, V5_SERVER_BUSY, err, done) : done(err);
    }
    metrics.counters.errors[kind]++;
    log.debug('mqtt publish refused', { topic: packet.topic, reason: err.message });
    if (kind === 'auth' || deps.denyAction === 'disconnect') {
      return v5 ? disconnect(client, kind === 'packet' ? V5_PAYLOAD_FORMAT_INVALID : V5_NOT_AUTHORIZED, err, done) : done(err);
    }
    if (v5) return done(counted(err));
    dropped.add(packet);
    done(null);
  }

  /** The PUBACK aedes would write once `done` has an error goes nowhere: the connection is closed by then. */
  function disconnect(client: Client, reasonCode: number, err: Error, done: (err?: Error | null) => void): void {
    client.disconnect({ reasonCode }, () => done(counted(err)));
  }

  function authorizeSubscribe(client: Client, sub: Subscription, done: (err: Error | null, sub?: Subscription | null) => void): void {
    const session = sessions.get(client);
    const filter = parseSubscribeFilter(sub.topic);
    if (!session || !filter) {
      metrics.counters.errors.authz++;
      return done(null, null);
    }
    // A new filter beyond the bound is refused like a denied one (0x80); one already held may be renewed.
    const held = (client as Client & { subscriptions: Record<string, unknown> }).subscriptions;
    if (!(sub.topic in held) && !session.filters.has(sub.topic) && heldOrPending(held, session.filters) >= deps.maxSubscriptions) {
      log.debug('mqtt subscription refused: too many held', { clientId: client.id, max: deps.maxSubscriptions });
      return done(null, null);
    }
    session.filters.set(sub.topic, 'deciding');
    messaging.authorizeSubscribe({ device: session.identity }, filter.workspaceId, filter.channelId).then(
      () => {
        session.filters.set(sub.topic, 'granted');
        done(null, sub);
      },
      (err: unknown) => {
        session.filters.delete(sub.topic);
        const appErr = toAppError(err);
        if (isTransient(appErr)) log.warn('mqtt subscribe authorization unavailable', { err: appErr.message });
        else metrics.counters.errors.authz++;
        // A refused filter gets 0x80 in its SUBACK slot; the other filters of the packet are unaffected.
        done(null, null);
      },
    );
  }

  return {
    authenticate,
    authorizePublish,
    publishFramed,
    authorizeSubscribe,
    isDropped: (packet: object) => dropped.has(packet),
    /** Whether the client's SUBSCRIBE being completed was granted this filter (what its session may store). */
    granted: (client: Client, topic: string) => sessions.get(client)?.filters.get(topic) === 'granted',
    /** The client's SUBSCRIBE (or restored session) completed: its filters are held now, or were refused. */
    subscribed(client: Client, topics: readonly string[]): void {
      const filters = sessions.get(client)?.filters;
      if (filters) for (const topic of topics) filters.delete(topic);
    },
    identityOf: (client: Client) => sessions.get(client)?.identity,
    keyOf: (client: Client) => sessions.get(client)?.key,
    certificateOf: (client: Client) => sessions.get(client)?.certificate,
    /** Resolves when every PUBLISH being stored has been answered (shutdown waits for this). */
    async settle(): Promise<void> {
      while (inFlight.size) await Promise.allSettled([...inFlight]);
    },
  };
}

const isV5 = (client: Client) => (client as { version?: number }).version === 5;

/** Filters held plus those of SUBSCRIBEs still being completed that are not held yet. */
function heldOrPending(held: Record<string, unknown>, pending: ReadonlyMap<string, unknown>): number {
  let n = Object.keys(held).length;
  for (const topic of pending.keys()) if (!(topic in held)) n++;
  return n;
}

/** A refusal already counted here: the broker's clientError listener must not count it again. */
export function counted(err: Error): Error {
  return Object.assign(new Error(err.message), { counted: true });
}

export function isCounted(err: Error): boolean {
  return (err as { counted?: boolean }).counted === true;
}

function classify(err: Error): 'auth' | 'authz' | 'packet' | 'transient' {
  const refusal = (err as { refusal?: 'auth' | 'authz' | 'packet' }).refusal;
  if (refusal) return refusal;
  const appErr: AppError = toAppError(err);
  if (isTransient(appErr)) return 'transient';
  if (appErr.kind === 'UNAUTHENTICATED') return 'auth';
  if (PACKET.has(appErr.kind)) return 'packet';
  return 'authz';
}

export type Hooks = ReturnType<typeof createHooks>;
