// Reading a request body up to a route's limit, and the precheck that runs beside it (RouteOptions).
import { payloadTooLarge } from '../errors.js';
import type { Exchange } from './exchange.js';
import type { Replies } from './replies.js';
import { errorReply, type HttpHandler, type HttpReply, type RouteOptions } from './types.js';

/** The body whole, or 413 (closing the connection) past the limit unless onTooLarge takes that over. */
export function readBody(replies: Replies, ex: Exchange, limit: number, onBody: (body: Buffer) => void, onTooLarge?: () => void): void {
  let chunks: Buffer[] | undefined;
  let size = 0;
  let rejected = false;
  ex.res.onData((chunk, isLast) => {
    if (rejected || ex.aborted || ex.done) return;
    size += chunk.byteLength;
    if (size > limit) {
      rejected = true;
      return onTooLarge ? onTooLarge() : replies.sendAndClose(ex, errorReply(payloadTooLarge(limit)));
    }
    // uWS reuses the chunk's memory after this callback returns: copy it, into Node's buffer pool when
    // small (a fresh ArrayBuffer per request costs an allocation the GC tracks apart).
    const copy = Buffer.allocUnsafe(chunk.byteLength);
    copy.set(new Uint8Array(chunk));
    if (!isLast) {
      (chunks ??= []).push(copy);
      return;
    }
    // uWS corks the socket around its data callback too: a reply written synchronously here needs no cork.
    ex.corked = true;
    if (chunks !== undefined) chunks.push(copy);
    onBody(chunks === undefined ? copy : Buffer.concat(chunks, size));
    ex.corked = false;
  });
}

/**
 * RouteOptions.precheck: the check and the body reading run side by side; the handler runs once both
 * are through. A refusal is answered at once (closing the connection when the body is not all read);
 * a body over the limit is answered 413 only once the check let the request through.
 */
export function checkThenRead(replies: Replies, ex: Exchange, limit: number, handler: HttpHandler, options: RouteOptions): void {
  const precheck = options.precheck as NonNullable<RouteOptions['precheck']>;
  let verdict: { reply: HttpReply | undefined } | undefined;
  let body: Buffer | 'too large' | undefined;
  const decide = () => {
    if (verdict === undefined || ex.done || ex.aborted) return;
    if (verdict.reply !== undefined) {
      return body === undefined || body === 'too large' ? replies.sendAndClose(ex, verdict.reply) : replies.send(ex, verdict.reply);
    }
    if (body === undefined) return;
    if (body === 'too large') {
      options.onTooLarge?.(ex);
      return replies.sendAndClose(ex, errorReply(payloadTooLarge(limit)));
    }
    ex.body = body;
    replies.run(ex, handler);
  };
  let checked: HttpReply | undefined | Promise<HttpReply | undefined>;
  try {
    checked = precheck(ex);
  } catch (err) {
    checked = replies.replyOf(ex, err);
  }
  if (checked instanceof Promise) {
    checked.then((reply) => {
      verdict = { reply };
    }, (err) => {
      verdict = { reply: replies.replyOf(ex, err) };
    }).then(decide).catch((err) => replies.fail(ex, err));
  } else if (checked !== undefined) {
    return replies.sendAndClose(ex, checked);
  } else {
    verdict = { reply: undefined };
  }
  ex.corked = false;
  if (Number(ex.headers['content-length']) > limit) {
    body = 'too large';
    return decide();
  }
  readBody(replies, ex, limit, (b) => {
    body = b;
    decide();
  }, () => {
    body = 'too large';
    decide();
  });
}
