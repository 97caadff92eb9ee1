// LISTEN/NOTIFY on one dedicated connection: topic fan-out to subscribers, reconnect with backoff, and a
// "reconnected" signal so caches that may have missed notifications clear themselves.
import postgres from 'postgres';
import type { Logger } from '../log.js';
import { reconnectDelaySecs, type Queryable } from './client.js';

export const CHANNEL = 'svc_events';

export type NotifyHandler = (payload: unknown) => void;

export interface NotifyHub {
  /** Send now (or at commit, when given a transaction): the payload reaches every instance, this one too. */
  notify(topic: string, payload: unknown, sql?: Queryable): Promise<void>;
  subscribe(topic: string, handler: NotifyHandler): () => void;
  /** Called after the LISTEN connection was lost and re-established: notifications may have been missed. */
  onReconnect(handler: () => void): () => void;
  readonly connected: boolean;
  readonly reconnects: number;
  /** The backend pid of the LISTEN connection (tests terminate it to prove recovery). */
  readonly backendPid: number | undefined;
  close(): Promise<void>;
}

interface Message {
  t: string;
  p: unknown;
}

export function createNotifyHub(url: string, pool: Queryable, log: Logger): NotifyHub & { start(): Promise<void> } {
  const topics = new Map<string, Set<NotifyHandler>>();
  const reconnectHandlers = new Set<() => void>();
  let connected = false;
  let everConnected = false;
  let closing = false;
  let reconnects = 0;
  let backendPid: number | undefined;
  let retryTimer: NodeJS.Timeout | undefined;

  // onnotify/onclose are connection options postgres.js supports but does not declare in its types.
  const options = {
    max: 1,
    idle_timeout: undefined,
    max_lifetime: null,
    // No array columns here; and postgres.js fetches array types on connect in a promise it never awaits,
    // which a connection killed at that moment turns into an unhandled rejection.
    fetch_types: false,
    backoff: reconnectDelaySecs,
    connection: { application_name: 'svc-listen' },
    onnotify: (channel: string, raw: string) => {
      if (channel !== CHANNEL) return;
      dispatch(raw);
    },
    onclose: () => {
      if (closing) return;
      connected = false;
      backendPid = undefined;
      log.warn('LISTEN connection lost; reconnecting');
      schedule(0);
    },
  };
  const conn = postgres(url, options as postgres.Options<Record<string, never>>);

  function dispatch(raw: string): void {
    let msg: Message;
    try {
      msg = JSON.parse(raw) as Message;
    } catch {
      return log.warn('ignoring malformed notification', { raw: raw.slice(0, 200) });
    }
    const handlers = topics.get(msg.t);
    if (!handlers) return;
    for (const h of handlers) {
      try {
        h(msg.p);
      } catch (err) {
        log.error('notification handler failed', { topic: msg.t, err });
      }
    }
  }

  async function listen(): Promise<void> {
    const [row] = await conn<{ pid: number }[]>`select pg_backend_pid() as pid`;
    await conn.unsafe(`listen ${CHANNEL}`);
    backendPid = row?.pid;
    connected = true;
  }

  function schedule(attempt: number): void {
    if (closing || retryTimer) return;
    const delay = attempt === 0 ? 0 : Math.min(5000, 100 * 2 ** Math.min(attempt, 6));
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      listen().then(
        () => {
          reconnects++;
          log.info('LISTEN connection re-established', { reconnects });
          for (const h of reconnectHandlers) h();
        },
        (err) => {
          log.warn('LISTEN reconnect failed', { attempt, err: String(err) });
          schedule(attempt + 1);
        },
      );
    }, delay);
  }

  return {
    async start() {
      await listen();
      everConnected = true;
    },
    async notify(topic, payload, sql = pool) {
      const text = JSON.stringify({ t: topic, p: payload } satisfies Message);
      // NOTIFY payloads are limited to 8000 bytes; a bigger invalidation degrades to "clear everything".
      const body = text.length < 7900 ? text : JSON.stringify({ t: topic, p: { all: true } });
      await sql`select pg_notify(${CHANNEL}, ${body})`;
    },
    subscribe(topic, handler) {
      let set = topics.get(topic);
      if (!set) topics.set(topic, (set = new Set()));
      set.add(handler);
      return () => set.delete(handler);
    },
    onReconnect(handler) {
      reconnectHandlers.add(handler);
      return () => reconnectHandlers.delete(handler);
    },
    get connected() {
      return connected && everConnected;
    },
    get reconnects() {
      return reconnects;
    },
    get backendPid() {
      return backendPid;
    },
    async close() {
      closing = true;
      if (retryTimer) clearTimeout(retryTimer);
      await conn.end({ timeout: 1 });
    },
  };
}
