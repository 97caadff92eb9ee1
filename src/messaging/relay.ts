// Stored messages for subscribers held by other instances. A live WebSocket or a CoAP observation stays
// with the instance that accepted it, while a message is committed by whichever instance took the
// publish; behind a load balancer the two differ. So each instance announces the channels it has such
// subscribers on (LISTEN/NOTIFY through the hub, announced again every announceMs and forgotten after
// three missed announcements, so a crashed instance stops costing anything), and relays what it commits
// on a channel another instance watches, gathered per event-loop turn, as NOTIFY payloads on one
// connection of its own (one session's notifications arrive in the order sent), each notification
// saying where one publish ends and the next begins, so the receiving instance hands its subscribers the
// publishes as they were made (an MQTT subscriber gets one PUBLISH per publish, as it would here). A
// channel nobody elsewhere watches costs one map lookup. Best effort, like the subscriptions themselves:
// what is relayed while a LISTEN connection is down is not replayed (the reader has every message). MQTT
// subscribers are fed from here too when the broker has no shared backend (src/mqtt/remote-watch.ts);
// with Redis, its emitter carries messages between the instances' brokers instead.
import { randomUUID } from 'node:crypto';
import type { Sql } from '../db/client.js';
import type { NotifyHub } from '../db/notify-hub.js';
import type { Logger } from '../log.js';
import type { StoredMessage, StoredSource } from './types.js';

export interface RelaySettings {
  /** How often an instance announces its watched channels again. */
  announceMs: number;
  /** Notifications waiting to be sent at most; beyond, messages are dropped for remote subscribers (logged). */
  maxPending: number;
}

export interface RelayDeps {
  hub: Pick<NotifyHub, 'notify' | 'subscribe' | 'onReconnect'>;
  /** A connection of the relay's own, opened on the first relayed message (so sends stay in order). */
  connect: () => Sql;
  log: Logger;
  settings?: Partial<RelaySettings>;
  /** Messages another instance stored on a channel watched here. */
  deliver(messages: StoredMessage[], source: StoredSource): void;
}

export interface Relay {
  /** This instance has a subscriber on the channel while held (counted); the release ends it. */
  watch(channelId: string): () => void;
  /** One publish's messages, committed here: sent on when another instance watches their channel. */
  relay(messages: StoredMessage[], source: StoredSource): void;
  /** Asks the other instances to announce their channels (at start, and when ours may have missed some). */
  start(): Promise<void>;
  close(): Promise<void>;
}

const TOPIC_WATCH = 'messaging.watch';
const TOPIC_SYNC = 'messaging.sync';
const TOPIC_STORED = 'messaging.stored';
const DEFAULTS: RelaySettings = { announceMs: 30_000, maxPending: 1000 };
/** NOTIFY payloads end at 8000 bytes; the hub's envelope and the source fields fit in what is left. */
export const RELAY_CHUNK_BYTES = 7000;
/** Channel ids per announcement (36 characters and JSON punctuation each). */
const CHANNELS_PER_ANNOUNCEMENT = 150;

interface Watch {
  n: string;
  on: boolean;
  c: string[];
}
interface Stored {
  n: string;
  w: string;
  c: string;
  s: string | null;
  m: StoredMessage[];
  /** How many of m each publish holds, in order (absent: m is one publish). */
  p?: number[];
}

/** Messages for one notification, and how many of them each publish holds. */
export interface Chunk {
  messages: StoredMessage[];
  publishes: number[];
}

/** Bytes a publish's count may add to a notification (a chunk holds far fewer than 10,000 messages). */
const COUNT_BYTES = 5;
/** The two arrays' brackets. */
const EMPTY_BYTES = 4;

/**
 * Publishes grouped so that each group's JSON (messages and counts) stays under maxBytes. A publish
 * stays whole unless it alone exceeds the bound; a message larger than the bound alone is counted out.
 */
export function chunkPublishes(publishes: readonly (readonly StoredMessage[])[], maxBytes: number): { chunks: Chunk[]; tooLarge: number } {
  const chunks: Chunk[] = [];
  let current: Chunk = { messages: [], publishes: [] };
  let size = EMPTY_BYTES;
  let tooLarge = 0;
  const close = () => {
    if (current.messages.length > 0) chunks.push(current);
    current = { messages: [], publishes: [] };
    size = EMPTY_BYTES;
  };
  for (const publish of publishes) {
    const sized = publish.map((m) => ({ m, bytes: Buffer.byteLength(JSON.stringify(m)) + 1 }));
    const whole = sized.reduce((sum, x) => sum + x.bytes, COUNT_BYTES);
    // A publish that fits in a notification of its own is not split across two.
    if (size + whole > maxBytes && EMPTY_BYTES + whole <= maxBytes) close();
    let counted = false;
    for (const { m, bytes } of sized) {
      if (EMPTY_BYTES + COUNT_BYTES + bytes > maxBytes) {
        tooLarge++;
        continue;
      }
      if (size + bytes + (counted ? 0 : COUNT_BYTES) > maxBytes) {
        close();
        counted = false;
      }
      if (counted) current.publishes[current.publishes.length - 1] = (current.publishes.at(-1) as number) + 1;
      else {
        current.publishes.push(1);
        size += COUNT_BYTES;
        counted = true;
      }
      current.messages.push(m);
      size += bytes;
    }
  }
  close();
  return { chunks, tooLarge };
}

/** A notification's messages split back into the publishes they came from (one publish when p is absent or wrong). */
export function publishesOf(messages: StoredMessage[], counts: unknown): StoredMessage[][] {
  if (!Array.isArray(counts)) return [messages];
  const out: StoredMessage[][] = [];
  let at = 0;
  for (const n of counts) {
    if (!Number.isInteger(n) || (n as number) < 1 || at + (n as number) > messages.length) return [messages];
    out.push(messages.slice(at, (at += n as number)));
  }
  return at === messages.length ? out : [messages];
}

/**
 * Consecutive publishes of the same subtopic: a notification carries one source, and splitting by runs
 * rather than grouping by subtopic keeps the channel's commit order.
 */
function subtopicRuns(publishes: readonly StoredMessage[][]): StoredMessage[][][] {
  const runs: StoredMessage[][][] = [];
  let run: StoredMessage[][] = [];
  for (const p of publishes) {
    if (run.length > 0 && (run[0] as StoredMessage[])[0]?.subtopic !== p[0]?.subtopic) {
      runs.push(run);
      run = [];
    }
    run.push(p);
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

export function createRelay(deps: RelayDeps): Relay {
  const settings = { ...DEFAULTS, ...deps.settings };
  const { hub, log } = deps;
  const self = randomUUID();
  const local = new Map<string, number>();
  /** channel → instance → when its watch lapses without another announcement. */
  const remote = new Map<string, Map<string, number>>();
  let conn: Sql | undefined;
  let pending = 0;
  let dropped = 0;
  let closed = false;

  function announce(on: boolean, channels: string[]): Promise<void> {
    const sent: Promise<void>[] = [];
    for (let i = 0; i < channels.length; i += CHANNELS_PER_ANNOUNCEMENT) {
      sent.push(send(TOPIC_WATCH, { n: self, on, c: channels.slice(i, i + CHANNELS_PER_ANNOUNCEMENT) } satisfies Watch));
    }
    return Promise.all(sent).then(() => undefined);
  }

  /**
   * Channels whose first watch began or last watch ended this turn: announced together when the loop
   * turns (a thousand devices subscribing after a restart cost a few notifications, not a thousand), each
   * as it stands then (a watch begun and ended within the turn is withdrawn, which is harmless).
   */
  const changed = new Set<string>();
  function announceChange(channelId: string): void {
    if (changed.size === 0) setImmediate(announceChanged);
    changed.add(channelId);
  }
  function announceChanged(): void {
    const on: string[] = [];
    const off: string[] = [];
    for (const channelId of changed) (local.has(channelId) ? on : off).push(channelId);
    changed.clear();
    if (closed) return;
    if (on.length > 0) void announce(true, on);
    if (off.length > 0) void announce(false, off);
  }

  /** Never rejects: a lost notification is logged (the next announcement repeats a watch anyway). */
  function send(topic: string, payload: unknown, sql?: Sql): Promise<void> {
    pending++;
    return hub.notify(topic, payload, sql).then(
      () => undefined,
      (err: unknown) => log.warn('message relay notification failed', { topic, err: String(err) }),
    ).finally(() => {
      pending--;
    });
  }

  /** Whether another live instance watches the channel (lapsed watches are dropped on the way). */
  function watchedElsewhere(channelId: string, at?: number): boolean {
    const nodes = remote.get(channelId);
    // The publish path asks for every commit: a channel nobody elsewhere watches ends here.
    if (nodes === undefined) return false;
    const now = at ?? Date.now();
    for (const [node, until] of nodes) if (until <= now) nodes.delete(node);
    if (nodes.size === 0) remote.delete(channelId);
    return nodes.size > 0;
  }

  /** Publishes to relay, by channel, in commit order. */
  const outbox = new Map<string, { workspaceId: string; publishes: StoredMessage[][] }>();
  let flushing = false;

  function flush(): void {
    flushing = false;
    const groups = [...outbox.values()];
    outbox.clear();
    if (closed) return;
    conn ??= deps.connect();
    for (const { workspaceId, publishes } of groups) {
      for (const run of subtopicRuns(publishes)) sendRun(workspaceId, run);
    }
  }

  function sendRun(workspaceId: string, publishes: StoredMessage[][]): void {
    const head = (publishes[0] as StoredMessage[])[0] as StoredMessage;
    const { chunks, tooLarge } = chunkPublishes(publishes, RELAY_CHUNK_BYTES);
    if (tooLarge > 0) log.warn('message too large to relay to other instances', { channelId: head.channel, messages: tooLarge });
    for (const { messages: m, publishes: p } of chunks) {
      if (pending >= settings.maxPending) {
        // One line per burst: the count says how many were lost to remote subscribers.
        if (dropped++ === 0) log.warn('message relay falling behind; dropping for remote subscribers', { pending });
        continue;
      }
      if (dropped > 0) {
        log.info('message relay caught up', { dropped });
        dropped = 0;
      }
      // Sent one after another on one connection: postgres.js pipelines them, in this order.
      void send(TOPIC_STORED, { n: self, w: workspaceId, c: head.channel, s: head.subtopic, m, p } satisfies Stored, conn);
    }
  }

  const unsubscribe = [
    hub.subscribe(TOPIC_WATCH, (p) => {
      const w = p as Watch;
      if (w?.n === self || typeof w?.n !== 'string' || !Array.isArray(w.c)) return;
      const until = Date.now() + 3 * settings.announceMs;
      for (const channelId of w.c) {
        if (typeof channelId !== 'string') continue;
        let nodes = remote.get(channelId);
        if (w.on) {
          if (nodes === undefined) remote.set(channelId, (nodes = new Map()));
          nodes.set(w.n, until);
        } else if (nodes !== undefined) {
          nodes.delete(w.n);
          if (nodes.size === 0) remote.delete(channelId);
        }
      }
    }),
    hub.subscribe(TOPIC_SYNC, (p) => {
      if ((p as { n?: string })?.n !== self && local.size > 0) void announce(true, [...local.keys()]);
    }),
    hub.subscribe(TOPIC_STORED, (p) => {
      const s = p as Stored;
      if (s?.n === self || typeof s?.c !== 'string' || typeof s.w !== 'string' || !Array.isArray(s.m) || !local.has(s.c)) return;
      const from: StoredSource = { workspaceId: s.w, channelId: s.c, subtopic: typeof s.s === 'string' ? s.s : null, remote: true };
      for (const messages of publishesOf(s.m, s.p)) deps.deliver(messages, from);
    }),
    // Announcements may have been missed while the LISTEN connection was down: ask for them again.
    hub.onReconnect(() => {
      void send(TOPIC_SYNC, { n: self });
      if (local.size > 0) void announce(true, [...local.keys()]);
    }),
  ];

  const timer = setInterval(() => {
    if (local.size > 0) void announce(true, [...local.keys()]);
    // Watches of an instance that went silent, on channels nothing is published to any more.
    const now = Date.now();
    for (const channelId of [...remote.keys()]) watchedElsewhere(channelId, now);
  }, settings.announceMs);
  timer.unref();

  return {
    watch(channelId) {
      const n = local.get(channelId) ?? 0;
      local.set(channelId, n + 1);
      if (n === 0) announceChange(channelId);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (local.get(channelId) ?? 1) - 1;
        if (left > 0) return void local.set(channelId, left);
        local.delete(channelId);
        if (!closed) announceChange(channelId);
      };
    },
    relay(messages, source) {
      if (source.remote || closed || !watchedElsewhere(source.channelId)) return;
      // Gathered until the event loop turns: a committed batch holds many publishes (one each, on a busy
      // channel), and one notification per publish would cost the database a statement per message.
      const group = outbox.get(source.channelId);
      if (group === undefined) outbox.set(source.channelId, { workspaceId: source.workspaceId, publishes: [messages] });
      else group.publishes.push(messages);
      if (!flushing) {
        flushing = true;
        setImmediate(flush);
      }
    },
    async start() {
      await hub.notify(TOPIC_SYNC, { n: self });
    },
    async close() {
      // What the writer's last batches left in the outbox still goes.
      flush();
      closed = true;
      clearInterval(timer);
      for (const stop of unsubscribe) stop();
      // Withdrawn at once rather than lapsing: the others stop relaying to this instance now.
      const withdrawn = announce(false, [...new Set([...local.keys(), ...changed])]);
      local.clear();
      changed.clear();
      await withdrawn;
      await conn?.end({ timeout: 1 });
    },
  };
}
