// Without a shared backend (Redis), a message another instance committed reaches this broker's
// subscribers only through the messaging relay, which sends a channel's publishes to the instances that
// watch it. So the broker watches every channel a subscription here covers, for as long as aedes can
// deliver on it: a connected client's subscription (aedes adds a deliver function per filter to its
// emitter through broker.subscribe and takes it away through broker.unsubscribe, on UNSUBSCRIBE and when
// the client goes), and a persistent session's subscription while its client is away (kept in the
// session store; what is published meanwhile waits in the session's queue).
import type { Aedes, Client, Subscription } from 'aedes';
import { parseSubscribeFilter } from './topics.js';

type Deliver = (...args: unknown[]) => void;
type Done = (err?: Error) => void;

interface SessionStore {
  addSubscriptions(client: Client, subs: Subscription[]): Promise<void>;
  removeSubscriptions(client: Client, topics: string[]): Promise<void>;
  cleanSubscriptions(client: Client): Promise<void>;
}

/** Watches held per owner (a deliver function, or a session's client id) and filter. */
function createHeld<K>(watch: (channelId: string) => () => void) {
  const held = new Map<K, Map<string, () => void>>();
  return {
    add(owner: K, filter: string): void {
      const channel = parseSubscribeFilter(filter);
      if (channel === null) return;
      let filters = held.get(owner);
      if (filters === undefined) held.set(owner, (filters = new Map()));
      if (!filters.has(filter)) filters.set(filter, watch(channel.channelId));
    },
    remove(owner: K, filter: string): void {
      const filters = held.get(owner);
      filters?.get(filter)?.();
      filters?.delete(filter);
      if (filters?.size === 0) held.delete(owner);
    },
    removeAll(owner: K): void {
      for (const release of held.get(owner)?.values() ?? []) release();
      held.delete(owner);
    },
    clear(): void {
      for (const owner of [...held.keys()]) this.removeAll(owner);
    },
  };
}

/**
 * Keeps a relay watch on each channel this broker's subscriptions cover; returns what releases them all
 * (the broker closing).
 */
export function watchSubscribedChannels(broker: Aedes, watch: (channelId: string) => () => void): () => void {
  const live = createHeld<Deliver>(watch);
  const sessions = createHeld<string>(watch);
  const target = broker as unknown as {
    subscribe(topic: string, func: Deliver, done?: Done): void;
    unsubscribe(topic: string, func: Deliver, done?: Done): void;
    persistence: SessionStore;
  };

  const subscribe = target.subscribe.bind(broker);
  const unsubscribe = target.unsubscribe.bind(broker);
  target.subscribe = (topic, func, done) => {
    live.add(func, topic);
    subscribe(topic, func, (err?: Error) => {
      // Refused (too many levels): no deliver function was added, so nothing is watched for it.
      if (err) live.remove(func, topic);
      done?.(err);
    });
  };
  target.unsubscribe = (topic, func, done) => {
    live.remove(func, topic);
    unsubscribe(topic, func, done);
  };

  const store = target.persistence;
  const add = store.addSubscriptions.bind(store);
  const remove = store.removeSubscriptions.bind(store);
  const clean = store.cleanSubscriptions.bind(store);
  store.addSubscriptions = async (client, subs) => {
    await add(client, subs);
    for (const sub of subs) sessions.add(client.id, sub.topic);
  };
  store.removeSubscriptions = async (client, topics) => {
    await remove(client, topics);
    for (const topic of topics) sessions.remove(client.id, topic);
  };
  store.cleanSubscriptions = async (client) => {
    await clean(client);
    sessions.removeAll(client.id);
  };

  return () => {
    live.clear();
    sessions.clear();
  };
}
