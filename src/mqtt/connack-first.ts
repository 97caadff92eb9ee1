// MQTT-3.2.0-1: the first packet the server sends a client is its CONNACK. aedes (1.2, 2.0 beta) restores a
// persistent session's subscriptions before it writes the CONNACK, so a message arriving in between (common with
// several instances: another node's publish comes in over Redis while this node is still connecting the
// client) was written first. mqtt.js then never completes its connect ("connack timeout"). Deliveries to
// a client are therefore held until its CONNACK is written, then released in arrival order.
import type { Aedes, Client } from 'aedes';

type Deliver = (packet: unknown, cb: () => void) => void;

interface DeliveringClient {
  closed: boolean;
  connackSent?: boolean;
  deliver0: Deliver;
  deliverQoS: Deliver;
  once(event: 'close', listener: () => void): unknown;
}

const held = new WeakMap<object, (() => void)[]>();

/**
 * Call from the authenticate hook, before aedes restores subscriptions (they capture these functions).
 * A client that closes before its CONNACK releases what was held: the writes fail as "connection closed"
 * and every callback still runs, so the emitter is never left waiting.
 */
export function holdDeliveriesUntilConnack(client: Client): void {
  const c = client as unknown as DeliveringClient;
  const queue: (() => void)[] = [];
  held.set(c, queue);
  for (const name of ['deliver0', 'deliverQoS'] as const) {
    const deliver = c[name];
    c[name] = (packet, cb) => {
      if (held.has(c)) queue.push(() => deliver(packet, cb));
      else deliver(packet, cb);
    };
  }
  c.once('close', () => release(c));
}

function release(client: object): void {
  const queue = held.get(client);
  if (queue === undefined) return;
  held.delete(client);
  for (const deliver of queue) deliver();
}

/** aedes emits connackSent right after the CONNACK's write completed. */
export function releaseOnConnack(broker: Aedes): void {
  broker.on('connackSent', (_packet, client) => release(client));
}
