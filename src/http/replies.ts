// Writing replies on a uWS listener: synchronously inside its callback when the handler answered at once,
// corked later otherwise, large and streamed bodies as the socket drains, HEAD as the GET's head. It also
// keeps the listener's in-flight count, which draining waits on.
import { performance } from 'node:perf_hooks';
import { isUnexpected, toAppError } from '../errors.js';
import type { Logger } from '../log.js';
import { writeHead, type Exchange } from './exchange.js';
import { errorReply, type HttpHandler, type HttpReply } from './types.js';

const LARGE_BODY = 64 * 1024;

export class Replies {
  inFlight = 0;
  /** Set when the listener stops: every reply from then on closes its connection. */
  draining = false;
  drained: (() => void) | undefined = undefined;

  constructor(private readonly log: Logger) {}

  /** A request counted in: finish() counts it out, once, however it ends. */
  begin(): void {
    this.inFlight++;
  }

  finish(ex: Exchange): void {
    if (ex.done) return;
    ex.done = true;
    this.inFlight--;
    const stats = ex.stats;
    if (stats !== undefined) {
      const statuses = stats.statuses;
      const slot = (ex.status / 100) | 0;
      statuses[slot] = (statuses[slot] as number) + 1;
      stats.latency.observe((performance.now() - ex.started) / 1000);
    }
    if (this.inFlight === 0 && this.drained) this.drained();
  }

  /** Runs a handler and sends what it answers, now or when its promise settles. */
  run(ex: Exchange, handler: HttpHandler): void {
    let result: HttpReply | Promise<HttpReply>;
    try {
      result = handler(ex);
    } catch (err) {
      return this.fail(ex, err);
    }
    if (result instanceof Promise) {
      this.watchAbort(ex);
      result.then((reply) => this.send(ex, reply), (err) => this.fail(ex, err));
    } else {
      this.send(ex, result);
    }
  }

  send(ex: Exchange, reply: HttpReply): void {
    if (ex.aborted || ex.done) return;
    if (ex.method === 'HEAD') return this.sendHead(ex, reply);
    const body = reply.body;
    if (body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      this.watchAbort(ex);
      void this.stream(ex, reply, body);
      return;
    }
    if (ex.corked) this.writeReply(ex, reply, body);
    else ex.res.cork(() => this.writeReply(ex, reply, body));
  }

  /** For a request whose body is not all read: the unread rest must not be parsed as the next request. */
  sendAndClose(ex: Exchange, reply: HttpReply): void {
    ex.res.cork(() => {
      writeHead(ex, reply);
      ex.res.end(reply.body as string, true);
      this.finish(ex);
    });
  }

  fail(ex: Exchange, err: unknown): void {
    this.send(ex, this.replyOf(ex, err));
  }

  /** An error as its reply, logged when it is ours, not the client's. */
  replyOf(ex: Exchange, err: unknown): HttpReply {
    const appErr = toAppError(err);
    if (isUnexpected(appErr)) this.log.error('request failed', { requestId: ex.requestId, err });
    return errorReply(appErr);
  }

  /**
   * uWS needs onAborted only for responses written after its callback returned; a reply written
   * synchronously skips the registration (and its closure) altogether.
   */
  watchAbort(ex: Exchange): void {
    if (ex.watched) return;
    ex.watched = true;
    ex.res.onAborted(() => {
      ex.aborted = true;
      ex.wake?.();
      this.finish(ex);
    });
  }

  private writeReply(ex: Exchange, reply: HttpReply, body: string | Uint8Array | undefined): void {
    writeHead(ex, reply);
    if (body !== undefined && body.length > LARGE_BODY / 4) {
      const bytes = typeof body === 'string' ? Buffer.from(body) : body;
      if (bytes.byteLength > LARGE_BODY) return this.endLarge(ex, bytes);
    }
    ex.res.end(body, this.draining);
    this.finish(ex);
  }

  /**
   * HEAD runs the GET handler and sends its head: the status, the headers and the Content-Length the GET
   * body would have (RFC 9110 9.3.2), no body. A streamed body's length is not known: none is stated.
   */
  private sendHead(ex: Exchange, reply: HttpReply): void {
    const body = reply.body;
    let length: number | undefined;
    if (typeof body === 'string') length = Buffer.byteLength(body);
    else if (body instanceof Uint8Array) length = body.byteLength;
    else if (body !== undefined) void body[Symbol.asyncIterator]().return?.();
    const write = () => {
      writeHead(ex, reply);
      // The length is written by hand: this uWS build's endWithoutBody(length) leaves the response open
      // (uWS then aborts the process as for a handler that never answered); only the bare form ends it.
      if (length !== undefined) ex.res.writeHeader('content-length', String(length));
      ex.res.endWithoutBody();
      this.finish(ex);
    };
    if (ex.corked) write();
    else ex.res.cork(write);
  }

  /** Large bodies go out as the socket drains instead of being buffered whole in the kernel queue. */
  private endLarge(ex: Exchange, body: Uint8Array): void {
    const { res } = ex;
    const total = body.byteLength;
    const start = res.getWriteOffset();
    const [, done] = res.tryEnd(body, total);
    if (done) return this.finish(ex);
    this.watchAbort(ex);
    res.onWritable((offset) => {
      if (ex.aborted) return true;
      const [ok, finished] = res.tryEnd(body.subarray(offset - start), total);
      if (finished) this.finish(ex);
      return ok;
    });
  }

  private async stream(ex: Exchange, reply: HttpReply, body: AsyncIterable<string | Uint8Array>): Promise<void> {
    ex.res.cork(() => writeHead(ex, reply));
    const iterator = body[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await iterator.next();
        if (ex.aborted) break;
        if (next.done) {
          ex.res.cork(() => ex.res.end(undefined, this.draining));
          break;
        }
        let ok = true;
        ex.res.cork(() => {
          ok = ex.res.write(next.value);
        });
        if (!ok) {
          await new Promise<void>((resolve) => {
            ex.wake = resolve;
            ex.res.onWritable(() => {
              ex.wake = undefined;
              resolve();
              return true;
            });
          });
        }
      }
    } catch (err) {
      // Headers are gone already: the only honest signal left is cutting the connection.
      this.log.error('stream failed', { requestId: ex.requestId, err });
      if (!ex.aborted) ex.res.cork(() => ex.res.close());
    } finally {
      if (ex.aborted) await iterator.return?.();
      this.finish(ex);
    }
  }
}
