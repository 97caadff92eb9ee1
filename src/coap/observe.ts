// CoAP subscriptions (RFC 7641 Observe). GET /m/<workspace_id>/c/<channel_id>[/<subtopic>]?auth=<key> with
// Observe: 0 makes the device an observer of the channel when it holds subscribe on it (the decision MQTT
// subscribers and the reader get). From then on every message stored on the channel, whatever protocol
// brought it, arrives as a notification: a SenML JSON pack of resolved records (Content-Format 110) that
// fits one datagram. With a subtopic only that subtopic's messages (exact), without one all the
// channel's. A channel has no current state, so the registration is answered with an empty pack.
//
// An observation ends when its client sends GET with Observe: 1 and the same token, answers a
// notification with RST, or stops acknowledging confirmable ones (a non-confirmable observation gets
// every CONFIRMABLE_EVERY-th notification confirmable, to find out); when a periodic check finds its key or
// grant gone (a last 4.01 or 4.03); and at shutdown (a last 5.03, so clients register elsewhere).
import type { ClientPeer, DeviceIdentity } from '../auth/index.js';
import { rateLimited, toAppError, unauthenticated, unavailable, type AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { refusalOf, startRevalidation, toResolvedSenml, type Messaging, type StoredMessage } from '../messaging/index.js';
import { answer, answerError, nextNotification, endObservationStopping, type Notifier, type Req, type Res } from './answer.js';

export interface ObserveSettings {
  /** Observations this instance holds at most; a registration beyond answers 5.03. */
  maxObservations: number;
  /** Observations one device may hold; a registration beyond answers 4.29. */
  maxPerDevice: number;
  /** Keys and subscribe decisions of open observations are checked again this often (0: never). */
  revalidateSecs: number;
}

export interface ObserveDeps {
  messaging: Pick<Messaging, 'authorizeSubscribe' | 'onStored' | 'watch'>;
  authenticateDeviceKey(key: string, from?: ClientPeer | null): Promise<DeviceIdentity | null>;
  settings: ObserveSettings;
  log: Logger;
}

export interface ObservedChannel {
  workspaceId: string;
  channelId: string;
  subtopic: string | null;
}

interface Observation extends ObservedChannel {
  /** The client's endpoint and token: what a deregistration or a re-registration names. */
  id: string;
  res: Notifier;
  key: string;
  deviceId: string;
  /** Ends the channel watch this observation holds (messages other instances store reach it meanwhile). */
  unwatch: () => void;
  /** Registered non-confirmable: notifications since the last confirmable one. */
  sinceConfirmable: number | null;
}

export interface Observations {
  /** GET with Observe: 0 (the package made res a notification stream). */
  register(req: Req, res: Notifier, target: ObservedChannel, key: string): Promise<void>;
  /** GET with Observe: 1: ends the client's observation with that token, answered as a plain GET. */
  deregister(req: Req, res: Res): void;
  readonly size: number;
  /** Refuses new registrations and ends every observation with 5.03. */
  close(): void;
}

/** The default CoAP payload limit (coap's maxPayloadSize): a notification must fit one datagram. */
export const NOTIFICATION_BYTES = 1024;
const EMPTY_PACK = Buffer.from('[]');
/**
 * A non-confirmable observation gets every this-many-th notification confirmable: one left unacknowledged
 * (after the retransmissions) or answered with RST ends it, so notifications do not flow on to an
 * address nobody listens at, or that never asked (a registration from a forged source address).
 */
export const CONFIRMABLE_EVERY = 32;
// The per-device cap lifts when one of the device's observations ends: a retry hint, not a ban.
const PER_DEVICE_RETRY_SECS = 60;

/**
 * Records packed greedily into SenML JSON arrays of at most maxBytes each; a record that alone exceeds
 * maxBytes cannot be notified (block-wise transfer fetches a resource's current state, not one event).
 */
export function packsOf(records: readonly unknown[], maxBytes: number): { packs: Buffer[]; tooLarge: number } {
  const packs: Buffer[] = [];
  let tooLarge = 0;
  let current: string[] = [];
  let size = 2;
  const flush = () => {
    if (current.length > 0) packs.push(Buffer.from(`[${current.join(',')}]`));
    current = [];
    size = 2;
  };
  for (const record of records) {
    const text = JSON.stringify(record);
    const bytes = Buffer.byteLength(text);
    if (bytes + 2 > maxBytes) {
      tooLarge++;
      continue;
    }
    if (current.length > 0 && size + 1 + bytes > maxBytes) flush();
    size += (current.length > 0 ? 1 : 0) + bytes;
    current.push(text);
  }
  flush();
  return { packs, tooLarge };
}

const endpointOf = (req: Req) => `${req.rsinfo.address}:${req.rsinfo.port}/${req._packet.token?.toString('hex') ?? ''}`;

export function createObservations(deps: ObserveDeps): Observations {
  const { messaging, settings, log } = deps;
  const byId = new Map<string, Observation>();
  const byChannel = new Map<string, Set<Observation>>();
  const perDevice = new Map<string, number>();
  let closing = false;

  function add(o: Observation): void {
    byId.set(o.id, o);
    let set = byChannel.get(o.channelId);
    if (set === undefined) byChannel.set(o.channelId, (set = new Set()));
    set.add(o);
    perDevice.set(o.deviceId, (perDevice.get(o.deviceId) ?? 0) + 1);
    o.unwatch = messaging.watch(o.channelId);
  }

  /** Forgets the observation; true when it was still held (each one is forgotten once). */
  function forget(o: Observation): boolean {
    if (byId.get(o.id) !== o) return false;
    byId.delete(o.id);
    o.unwatch();
    const set = byChannel.get(o.channelId);
    set?.delete(o);
    if (set?.size === 0) byChannel.delete(o.channelId);
    const n = (perDevice.get(o.deviceId) ?? 1) - 1;
    if (n <= 0) perDevice.delete(o.deviceId);
    else perDevice.set(o.deviceId, n);
    return true;
  }

  /** The device behind the key, still allowed to subscribe to the channel; throws the refusal. `from`: at registration. */
  async function subscriber(key: string, target: ObservedChannel, from?: ClientPeer): Promise<DeviceIdentity> {
    const device = await deps.authenticateDeviceKey(key, from);
    if (device === null) throw unauthenticated('invalid device key');
    await messaging.authorizeSubscribe({ device }, target.workspaceId, target.channelId);
    return device;
  }

  const revalidation = startRevalidation<Observation>({
    what: 'coap observation', intervalSecs: settings.revalidateSecs, log,
    open: () => byId.values(),
    isOpen: (o) => byId.get(o.id) === o,
    refusal: (o) => refusalOf(subscriber(o.key, o).then((device) => {
      if (device.entityId !== o.deviceId) throw unauthenticated('invalid device key');
    }), log, 'coap observation'),
    end: (o, refusal) => {
      if (forget(o)) answerError(o.res, refusal);
    },
    describe: (o) => ({ channelId: o.channelId, deviceId: o.deviceId }),
  });

  const stopFanOut = messaging.onStored((messages: StoredMessage[], source) => {
    const observers = byChannel.get(source.channelId);
    if (observers === undefined) return;
    let packs: Buffer[] | undefined;
    for (const o of observers) {
      if (o.workspaceId !== source.workspaceId || (o.subtopic !== null && o.subtopic !== source.subtopic)) continue;
      if (packs === undefined) {
        const packed = packsOf(toResolvedSenml(messages), NOTIFICATION_BYTES);
        if (packed.tooLarge > 0) {
          log.warn('coap notification skipped: a record does not fit one datagram', { channelId: source.channelId, records: packed.tooLarge, maxBytes: NOTIFICATION_BYTES });
        }
        packs = packed.packs;
      }
      if (o.res.writableEnded) continue;
      for (const pack of packs) {
        let confirmable = o.sinceConfirmable === null;
        if (!confirmable && ++o.sinceConfirmable! >= CONFIRMABLE_EVERY) {
          o.sinceConfirmable = 0;
          confirmable = true;
        }
        nextNotification(o.res, confirmable);
        o.res.write(pack);
      }
    }
  });

  return {
    get size() {
      return byId.size;
    },
    async register(req, res, target, key) {
      const id = endpointOf(req);
      let device: DeviceIdentity;
      try {
        if (closing) throw unavailable('service stopping', 1);
        device = await subscriber(key, target, { ip: req.rsinfo.address });
        if (closing) throw unavailable('service stopping', 1);
        const previous = byId.get(id);
        // The same endpoint and token again is a re-registration (RFC 7641 4.1): it replaces the entry.
        if (previous !== undefined && forget(previous)) previous.res.end();
        if (byId.size >= settings.maxObservations) throw unavailable('too many observations', 1);
        if ((perDevice.get(device.entityId) ?? 0) >= settings.maxPerDevice) {
          throw rateLimited(PER_DEVICE_RETRY_SECS, `too many observations for this device (${settings.maxPerDevice})`);
        }
      } catch (err) {
        const e: AppError = toAppError(err);
        if (e.kind === 'INTERNAL') log.error('coap observation refused', { err });
        return answerError(res, e);
      }
      const o: Observation = {
        id, res, key, deviceId: device.entityId, unwatch: () => undefined, sinceConfirmable: req._packet.confirmable ? null : 0, ...target,
      };
      add(o);
      res.on('finish', () => forget(o));
      res.setOption('Content-Format', 'application/senml+json');
      res.write(EMPTY_PACK);
    },
    deregister(req, res) {
      const o = byId.get(endpointOf(req));
      if (o !== undefined && forget(o)) o.res.end();
      res.setOption('Content-Format', 'application/senml+json');
      answer(res, '2.05', '[]');
    },
    close() {
      closing = true;
      revalidation.stop();
      stopFanOut();
      for (const o of [...byId.values()]) {
        if (forget(o)) endObservationStopping(o.res);
      }
    },
  };
}
