// Where aedes keeps sessions, retained messages and QoS 1 queues, and how it fans out between instances:
// in memory for one instance, Redis (aedes-persistence-redis + mqemitter-redis) when a URL is configured.
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { Redis } from 'ioredis';
import MQEmitterRedis from 'mqemitter-redis';
import type { Logger } from '../log.js';

// The async persistence class (what aedes 1.x and 2.x require) is a CommonJS file without an exports map or types.
const require = createRequire(import.meta.url);

export interface BrokerBackend {
  /** Options to merge into Aedes.createBroker; empty for the in-memory default. */
  options: { persistence?: unknown; mq?: unknown };
  shared: boolean;
  /** Runs after the broker closed (aedes closes the emitter itself, never the persistence). */
  close(): Promise<void>;
}

export function createBrokerBackend(redis: { url: string; keyPrefix: string } | undefined, log: Logger): BrokerBackend {
  if (!redis) return { options: {}, shared: false, close: async () => undefined };
  const RedisPersistence = require('aedes-persistence-redis/asyncPersistence.js') as new (opts: { conn: Redis }) => {
    createRetainedStreamCombi(patterns: string[]): AsyncIterable<unknown> | Readable;
    destroy(): Promise<void>;
  };
  // The key prefix keeps deployments (and test runs) that share one Redis apart; pub/sub channels are
  // server-wide in Redis, so the emitter's topics are not prefixed and stay m/<workspace>/c/<channel>.
  const conn = new Redis(redis.url, { keyPrefix: redis.keyPrefix, lazyConnect: false, maxRetriesPerRequest: 3 });
  conn.on('error', (err: Error) => log.warn('redis persistence connection error', { err: err.message }));
  const persistence = new RedisPersistence({ conn });
  // aedes pipes the retained-message stream (.pipe), but this persistence returns an async generator
  // there; Readable.from makes it the stream aedes expects (the in-memory persistence does the same).
  const combi = persistence.createRetainedStreamCombi.bind(persistence);
  persistence.createRetainedStreamCombi = (patterns) => Readable.from(combi(patterns));
  const mq = MQEmitterRedis({ connectionString: redis.url });
  (mq as unknown as { state: NodeJS.EventEmitter }).state.on('error', (err: Error) => log.warn('redis emitter connection error', { err: err.message }));
  return {
    options: { persistence, mq },
    shared: true,
    async close() {
      try {
        await persistence.destroy();
      } catch (err) {
        log.warn('redis persistence did not close cleanly', { err });
      }
    },
  };
}
