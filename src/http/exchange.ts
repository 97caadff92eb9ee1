// One request/response pair on a uWS listener and what its head is written with: the request a handler
// sees, the bookkeeping the body reader and the reply writer share, request ids and pre-encoded heads.
import { randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { BucketCounts } from '../metrics/buckets.js';
import type { UwsResponse } from './uws.js';
import type { HttpReply, HttpRequest } from './types.js';

export const EMPTY = Buffer.alloc(0);
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

// Request ids only need to be unique, not secret: a per-process random prefix and a counter are enough
// and cost nothing next to a random UUID per request.
const idPrefix = randomBytes(6).toString('hex');
let idCounter = 0;

/** The client's X-Request-Id when it is a sane token, else one of ours. */
export function requestIdFor(incoming: string | undefined): string {
  return incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : `${idPrefix}-${(++idCounter).toString(36)}`;
}

/**
 * Requests of one route (its pattern, never the path asked for), counted once measure() was called: the
 * route's own numbers, bound when it was registered, so a request costs two clock reads and three writes.
 */
export interface RouteStats {
  readonly method: string;
  readonly route: string;
  /** By status class: [0] requests that ended without a reply (client gone), [1..5] 1xx..5xx. */
  readonly statuses: Float64Array;
  /** Seconds from the request's arrival to the end of its reply. */
  readonly latency: BucketCounts;
}

/**
 * One allocation per request, accessors on the prototype. `corked` is true while inside a uWS callback
 * (corked already); `watched` once onAborted is registered (only needed for replies written later).
 */
export class Exchange implements HttpRequest {
  aborted = false;
  done = false;
  watched = false;
  corked = true;
  wake: (() => void) | undefined = undefined;
  body: Buffer = EMPTY;
  /** The route's counters, while the server is measured; the arrival time and the status written. */
  stats: RouteStats | undefined = undefined;
  started = 0;
  status = 0;
  private peer: string | undefined = undefined;

  constructor(
    readonly res: UwsResponse,
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly headers: Record<string, string>,
    readonly params: string[],
    readonly requestId: string,
  ) {}

  // The response object stays valid until it is ended or aborted, so the address is read on demand.
  get ip(): string {
    if (this.peer === undefined) this.peer = this.aborted ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString();
    return this.peer;
  }
}

// uWS takes bytes as they are but encodes every JS string it is given: what repeats is encoded once.
const statusLines = new Map<number, Buffer>();
function statusLine(status: number): Buffer {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = Buffer.from(`${status} ${STATUS_CODES[status] ?? ''}`.trimEnd());
    statusLines.set(status, line);
  }
  return line;
}
const REQUEST_ID_HEADER = Buffer.from('x-request-id');
const encodedHeaderSets = new WeakMap<object, Buffer[]>();
/**
 * A frozen header set (a module constant) as name, value, name, value... bytes; undefined for a set
 * made per reply. The map is asked first: Object.isFrozen walks the properties, a lookup does not.
 */
function encodedHeaders(headers: Readonly<Record<string, string>>): Buffer[] | undefined {
  let encoded = encodedHeaderSets.get(headers);
  if (encoded === undefined && Object.isFrozen(headers)) {
    encoded = Object.entries(headers).flatMap(([name, value]) => [Buffer.from(name), Buffer.from(value)]);
    encodedHeaderSets.set(headers, encoded);
  }
  return encoded;
}

/** The status line and headers of a reply (the caller corks). */
export function writeHead(ex: Exchange, reply: HttpReply): void {
  const { res } = ex;
  ex.status = reply.status;
  // uWS writes '200 OK' itself when no status was written: the most common reply costs one call less.
  if (reply.status !== 200) res.writeStatus(statusLine(reply.status));
  res.writeHeader(REQUEST_ID_HEADER, ex.requestId);
  const headers = reply.headers;
  if (headers === undefined) return;
  const encoded = encodedHeaders(headers);
  if (encoded !== undefined) {
    for (let i = 0; i < encoded.length; i += 2) res.writeHeader(encoded[i] as Buffer, encoded[i + 1] as Buffer);
  } else {
    for (const key in headers) res.writeHeader(key, headers[key] as string);
  }
}
