// GHSA-52qw-whmv-87c5: aedes keys client.subscriptions, client.duplicates, broker.clients and its SUBSCRIBE
// de-duplication by strings from the wire in plain objects, so a filter named like an Object.prototype
// member reads back as present ("constructor" is always truthy). An authenticated device sending
// UNSUBSCRIBE "constructor" crashed the process. aedes 1.2.0 fixed it with null-prototype objects; the 2.0
// beta (the one with MQTT 5) predates the fix, so it is applied here to the same objects.
import type { Aedes, Client } from 'aedes';

const PROTO = '__proto__';
// A filter validateTopic refuses ('#' must be the last level): the SUBSCRIBE fails and the client is closed.
const REFUSED_FILTER = '#/__proto__';

interface Dictionaries {
  clients?: object;
  brokers?: object;
  subscriptions?: object;
  duplicates?: object;
}

function nullPrototype(owner: Dictionaries, names: (keyof Dictionaries)[]): void {
  for (const name of names) {
    const dict = owner[name];
    if (dict !== undefined && Object.getPrototypeOf(dict) !== null) Object.setPrototypeOf(dict, null);
  }
}

/** Once, right after the broker is created (before any client). */
export function hardenBroker(broker: Aedes): void {
  nullPrototype(broker as unknown as Dictionaries, ['clients', 'brokers']);
}

/**
 * Right after broker.handle(socket), before the first packet is read. The de-duplication object is built
 * per SUBSCRIBE inside aedes: there, only "__proto__" does harm (assigning it replaces the prototype),
 * so a SUBSCRIBE naming it is made to fail before aedes sees it.
 */
export function hardenClient(client: Client): void {
  const c = client as unknown as Dictionaries & { _parser?: NodeJS.EventEmitter };
  nullPrototype(c, ['subscriptions', 'duplicates']);
  c._parser?.prependListener('packet', (packet: { cmd: string; subscriptions?: { topic: string }[] }) => {
    if (packet.cmd !== 'subscribe' || !packet.subscriptions) return;
    for (const sub of packet.subscriptions) if (sub.topic === PROTO) sub.topic = REFUSED_FILTER;
  });
}
