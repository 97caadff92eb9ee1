// Final CoAP responses, for plain requests and for observations alike: the code, the reason as diagnostic
// payload (RFC 7252 5.5.2) and Max-Age as the retry hint of a 5.03 (section 5.9.3.4), like HTTP's Retry-After.
import coap from 'coap';
import type { AppError } from '../errors.js';

export type Req = InstanceType<typeof coap.IncomingMessage>;
export type Res = InstanceType<typeof coap.OutgoingMessage>;
/** The response to a GET with Observe: 0, which stays open for notifications. */
export type Notifier = InstanceType<typeof coap.ObserveWriteStream>;

// HTTP status of an AppError → CoAP response code (RFC 7252 section 12.1.2, RFC 8516 for 4.29).
const CODES: Record<number, string> = {
  400: '4.00', 401: '4.01', 403: '4.03', 404: '4.04', 405: '4.05', 409: '4.09', 413: '4.13', 415: '4.15',
  429: '4.29', 500: '5.00', 503: '5.03',
};

/** The coap package's private packet of an observation (dist/lib/observe_write_stream.js, coap 1.x). */
interface NotifierInternals {
  _packet: { options?: { name: string }[]; confirmable: boolean; ack: boolean };
  setOption: Notifier['setOption'];
}

export function answer(res: Res | Notifier, code: string, diagnostic?: string, maxAgeSecs?: number): void {
  if (res instanceof coap.ObserveWriteStream) return endObservation(res, code, diagnostic, maxAgeSecs);
  res.code = code;
  if (maxAgeSecs !== undefined) res.setOption('Max-Age', maxAgeSecs);
  res.end(diagnostic);
}

export function answerError(res: Res | Notifier, err: AppError): void {
  const retry = err.retryAfterSeconds === undefined ? undefined : Math.max(1, Math.ceil(err.retryAfterSeconds));
  answer(res, CODES[err.status] ?? '5.00', err.message, retry);
}

/**
 * An observation's last word: a refused registration, or a notification ending one. A non-2.xx response
 * carries no Observe option (RFC 7641 3.2) and no Content-Format (its payload is a diagnostic), but the
 * package's stream adds Observe to everything it writes: the options are set here and its setter is
 * stilled for this last write. Confirmable as the registration was, unless asked not to be (at
 * shutdown: nothing would be left to retransmit it).
 */
function endObservation(res: Notifier, code: string, diagnostic?: string, maxAgeSecs?: number, confirmable?: boolean): void {
  const internals = res as unknown as NotifierInternals;
  internals._packet.options = (internals._packet.options ?? []).filter((o) => o.name !== 'Observe' && o.name !== 'Content-Format');
  if (maxAgeSecs !== undefined) res.setOption('Max-Age', maxAgeSecs);
  // A refused registration is the answer to its request (piggybacked on the ACK of a confirmable one);
  // an observation ending is a notification of its own.
  if (res._counter > 0) nextNotification(res, confirmable ?? res._request.confirmable === true);
  internals.setOption = () => res;
  res.statusCode = code;
  // Never empty: the stream sends nothing for an empty last write once it has notified.
  res.end(Buffer.from(diagnostic || code));
}

/** Ends an established observation with a non-confirmable 5.03 (the service is stopping). */
export function endObservationStopping(res: Notifier): void {
  endObservation(res, '5.03', 'service stopping', 1, false);
}

/**
 * The message type of the next notification: confirmable or not. Set before every notification because
 * the package, after its first response, marks those of a non-confirmable registration as ACKs (type 2,
 * acknowledging nothing; coap 1.5), which clients matching ACKs to their own message ids drop.
 */
export function nextNotification(res: Notifier, confirmable: boolean): void {
  const packet = (res as unknown as NotifierInternals)._packet;
  packet.ack = false;
  packet.confirmable = confirmable;
}
