// The publication listener on a thread of its own (SVC_PKI_PUBLICATION_THREAD, off by default). node:http
// spends most of an answer in its own JavaScript (the parser's callbacks, streams, sockets): in the
// service's isolate that code also carries TLS, HTTP/2, MQTT and database sockets, its inline caches go
// megamorphic, and an answer cost 1.2-1.4x the CPU of a bare node:http server. In an isolate that sees
// nothing but this listener it runs at the bare server's cost. The thread keeps the OCSP answers the main
// thread says hold unchanged (those without a nonce) and asks it for everything else over a MessagePort,
// so the database, the keys and the caches' coherence stay in one place. A shared generation, moved here
// synchronously by every change of the coherence (a revocation before its call returns, one on another
// instance, an authority change), retires what the thread keeps before any later request reads it.
// The price is the round trip for what it does not keep: a nonce answer (what `openssl ocsp` sends by
// default) crosses to the main thread and back, and costs more CPU than on the main thread's listener.
import { Worker } from 'node:worker_threads';
import { errorReply, type HttpReply } from '../../http/types.js';
import type { RateLimitConfig } from '../../http/rate-limit.js';
import type { LogLevel } from '../../config.js';
import { toAppError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { withoutModuleHooks } from '../../worker-pool.js';
import type { PublicationCoherence } from './publication-coherence.js';
import type { PublicationListener } from './publication-listener.js';
import type { PublicationHandlers, ReusableReply } from './publication-routes.js';
import type { FromThread, ThreadCall, ToThread } from './publication-thread-messages.js';

/** What the thread keeps: answers of ~1.5 KB, so about 16 MB at most besides the main thread's own. */
const KEEP = { entries: 10_000, bytes: 16 * 1024 * 1024 };
/** A thread that died is started again on the same port after this pause. */
const RESTART_MS = 1000;

const LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];

export function createPublicationThread(deps: {
  handlers: PublicationHandlers; coherence: PublicationCoherence; rateLimits: RateLimitConfig; log: Logger;
}): PublicationListener & { readonly stats: { asked: number } } {
  const { handlers: h, log } = deps;
  const generation = new Int32Array(new SharedArrayBuffer(4));
  deps.coherence.onChange(() => {
    Atomics.add(generation, 0, 1);
  });
  const logLevel = LEVELS.find((l) => log.enabled(l)) ?? 'silent';
  const stats = { asked: 0 };
  let worker: Worker | null = null;
  let closing = false;

  const asReusable = (reply: HttpReply): ReusableReply => ({ reply, reusableSecs: 0 });
  function dispatch(call: ThreadCall): ReusableReply | Promise<ReusableReply> {
    switch (call.op) {
      case 'trustBundle': return h.trustBundle().then(asReusable);
      case 'issuerCertificate': return h.issuerCertificate(call.issuerId).then(asReusable);
      case 'crl': return h.crl(call.issuerId).then(asReusable);
      case 'ocspPost': return h.ocspPostReusable(call.issuerId, Buffer.from(call.body.buffer, call.body.byteOffset, call.body.byteLength));
      case 'ocspGet': return h.ocspGetReusable(call.issuerId, call.path);
    }
  }

  function failed(err: unknown): ReusableReply {
    const e = toAppError(err);
    if (e.kind === 'INTERNAL') log.error('publication request failed', { err });
    return asReusable(errorReply(e));
  }

  function answer(thread: Worker, id: number, call: ThreadCall): void {
    stats.asked++;
    // The generation before the answer is made: if anything moves while it is, the thread does not keep it.
    const at = Atomics.load(generation, 0);
    const send = (r: ReusableReply) => {
      const message: ToThread = { id, reply: r.reply, ...(r.reusableSecs > 0 ? { reusable: { secs: r.reusableSecs, generation: at } } : {}) };
      thread.postMessage(message);
    };
    let out: ReusableReply | Promise<ReusableReply>;
    try {
      out = dispatch(call);
    } catch (err) {
      out = failed(err);
    }
    if (out instanceof Promise) out.then(send, (err: unknown) => send(failed(err)));
    else send(out);
  }

  function start(host: string, port: number): Promise<number> {
    const thread = new Worker(new URL('./publication-listener-thread.js', import.meta.url), {
      workerData: { host, port, generation, rateLimits: deps.rateLimits, logLevel, keep: KEEP },
      execArgv: withoutModuleHooks(process.execArgv),
    });
    worker = thread;
    return new Promise((resolve, reject) => {
      let bound = 0;
      thread.on('message', (message: FromThread) => {
        if ('id' in message) return answer(thread, message.id, message.call);
        if ('listening' in message) {
          bound = message.listening;
          return resolve(bound);
        }
        if ('failed' in message) {
          reject(Object.assign(new Error(message.failed.message), { code: message.failed.code }));
          void thread.terminate();
        }
      });
      thread.on('error', (err) => {
        log.error('publication listener thread failed', { err });
        reject(err);
      });
      thread.on('exit', (code) => {
        if (worker === thread) worker = null;
        // Died while serving: started again on the port it had, so the certificates' URLs keep answering.
        if (!closing && bound !== 0) {
          log.error('publication listener thread exited; starting another', { code });
          setTimeout(() => {
            if (!closing) start(host, bound).catch((err: unknown) => log.error('publication listener thread did not start again', { err }));
          }, RESTART_MS).unref();
        }
      });
    });
  }

  return {
    listen: start,
    async close() {
      closing = true;
      const thread = worker;
      if (!thread) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2000);
        thread.on('message', (message: FromThread) => {
          if ('closed' in message) {
            clearTimeout(timer);
            resolve();
          }
        });
        thread.postMessage({ close: true } satisfies ToThread);
      });
      await thread.terminate();
    },
    stats,
  };
}
