// The publication listener's thread (started by publication-thread.ts): the node:http listener of
// publication-listener.ts, answering from the OCSP answers it keeps and asking the main thread for the
// rest. What it keeps is served only while the shared generation is the one the main thread answered
// under: every change of the publication's coherence (a revocation here before its call returns, one on
// another instance, an authority change) moves it, on the main thread, synchronously.
import { parentPort, workerData } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { createRateLimiter, type RateLimitConfig } from '../../http/rate-limit.js';
import type { HttpReply } from '../../http/types.js';
import type { LogLevel } from '../../config.js';
import { createLogger } from '../../log.js';
import { createPublicationListener, type ListenerHandlers } from './publication-listener.js';
import type { FromThread, ThreadCall, ToThread } from './publication-thread-messages.js';

interface ThreadData {
  host: string;
  port: number;
  generation: Int32Array;
  rateLimits: RateLimitConfig;
  logLevel: LogLevel;
  keep: { entries: number; bytes: number };
}

const data = workerData as ThreadData;
const port = parentPort!;
const post = (message: FromThread) => port.postMessage(message);

/** Request bodies longer than this are answered but never kept (the main thread keys the same way). */
const MAX_KEYED = 1024;
/** id-pkix-ocsp-nonce as an encoded OID: a request carrying it is answered afresh every time. */
const NONCE_OID = Buffer.from('06092b0601050507300102', 'hex');

interface Kept {
  reply: HttpReply;
  generation: number;
  until: number;
}

const kept = new LRUCache<string, Kept>({
  max: data.keep.entries,
  maxSize: data.keep.bytes,
  sizeCalculation: (k, key) => key.length + ((k.reply.body as Uint8Array | undefined)?.byteLength ?? 0) + 200,
});

let nextId = 0;
const waiting = new Map<number, (reply: HttpReply, reusable: { secs: number; generation: number } | undefined) => void>();

function ask(call: ThreadCall): Promise<{ reply: HttpReply; reusable?: { secs: number; generation: number } }> {
  const id = ++nextId;
  return new Promise((resolve) => {
    waiting.set(id, (reply, reusable) => resolve({ reply, reusable }));
    post({ id, call });
  });
}

/** A kept answer still true, or the main thread's, kept when it says it may be. */
function reusable(key: string | null, call: ThreadCall): HttpReply | Promise<HttpReply> {
  if (key !== null) {
    const hit = kept.get(key);
    if (hit && hit.generation === Atomics.load(data.generation, 0) && Date.now() < hit.until) return hit.reply;
  }
  return ask(call).then(({ reply, reusable: r }) => {
    // Kept only when nothing moved since the main thread answered: the generation it answered under is
    // still the current one here.
    if (key !== null && r && r.secs > 0 && r.generation === Atomics.load(data.generation, 0)) {
      kept.set(key, { reply, generation: r.generation, until: Date.now() + r.secs * 1000 });
    }
    return reply;
  });
}

const handlers: ListenerHandlers = {
  trustBundle: () => ask({ op: 'trustBundle' }).then((r) => r.reply),
  issuerCertificate: (issuerId) => ask({ op: 'issuerCertificate', issuerId }).then((r) => r.reply),
  crl: (issuerId) => ask({ op: 'crl', issuerId }).then((r) => r.reply),
  ocspPost(issuerId, body) {
    const keyed = body.length > 0 && body.length <= MAX_KEYED && body.indexOf(NONCE_OID) < 0;
    return reusable(keyed ? `p|${issuerId}|${body.toString('latin1')}` : null, { op: 'ocspPost', issuerId, body });
  },
  ocspGet(issuerId, path) {
    return reusable(path.length <= MAX_KEYED * 2 ? `g|${path}` : null, { op: 'ocspGet', issuerId, path });
  },
};

const log = createLogger(data.logLevel).child({ thread: 'pki_publication' });
const listener = createPublicationListener({ handlers, limiter: createRateLimiter(data.rateLimits), log });

port.on('message', (message: ToThread) => {
  if ('id' in message) {
    const done = waiting.get(message.id);
    waiting.delete(message.id);
    done?.(message.reply, message.reusable);
    return;
  }
  if (message.close) {
    void listener.close().then(() => post({ closed: true }));
  }
});

listener.listen(data.host, data.port).then(
  (bound) => post({ listening: bound }),
  (err: NodeJS.ErrnoException) => post({ failed: { message: err.message, code: err.code ?? null } }),
);
