// HTTP surfaces of messaging: device publish on the messaging listener, the message reader on its own.
import type { ClientPeer, DeviceIdentity, Principal } from '../auth/index.js';
import { answerTooLarge, AppError, invalidInput, isAppError, unauthenticated } from '../errors.js';
import type { Authenticate } from '../graphql/context.js';
import type { HttpServer } from '../http/server.js';
import { decodePathSegment, json, JSON_HEADERS, type HttpReply, type HttpRequest } from '../http/types.js';
import { utf8Within } from '../json-size.js';
import { uuid } from '../validate.js';
import type { MessageRow, ValueComparator } from './queries.js';
import type { MessagingService, ReadQuery, Subject } from './service.js';
import { subtopicParam, subtopicProblem } from './subtopic.js';
import type { Protocol } from './types.js';

const ACCEPTED: HttpReply = Object.freeze({ status: 202 }) as HttpReply;
const PUBLISH_HEADERS = ['authorization', 'content-type', 'content-length'] as const;
const PREFIX_SEGMENTS = 6; // '', 'http', 'm', ws, 'c', ch
const PROTOCOLS: ReadonlySet<string> = new Set<Protocol>(['http', 'mqtt', 'coap']);
const COMPARATORS: ReadonlySet<string> = new Set<ValueComparator>(['eq', 'lt', 'le', 'gt', 'ge']);

export interface Credentials {
  authorization?: string;
  /** Browser fallbacks for WebSockets, which cannot set headers: a bearer token or a device key. */
  token?: string | null;
  key?: string | null;
}

/** `Client <key>` → the device; `Bearer <token>` → the principal; 401 when absent or unusable. */
export type AuthenticateDeviceKey = (key: string, from?: ClientPeer | null) => Promise<DeviceIdentity | null>;

/** `from`: the client (a key not cached is throttled by its address); absent for the service's re-checks. */
export async function subjectOf(authenticate: Authenticate, authenticateDeviceKey: AuthenticateDeviceKey, c: Credentials, from?: ClientPeer): Promise<Subject> {
  const header = c.authorization;
  let key: string | null | undefined = c.key;
  let token: string | null | undefined = c.token;
  if (header !== undefined) {
    const space = header.indexOf(' ');
    const scheme = space < 0 ? header.toLowerCase() : header.slice(0, space).toLowerCase();
    if (scheme === 'client') key = header.slice(space + 1).trim();
    else if (scheme === 'bearer') token = header.slice(space + 1).trim();
    else throw unauthenticated("authorization must be 'Bearer <token>' or 'Client <device key>'");
  }
  if (key) {
    const device = await authenticateDeviceKey(key, from);
    if (!device) throw unauthenticated('invalid device key');
    return { device };
  }
  if (token) {
    let principal: Principal | null;
    try {
      principal = await authenticate({ authorization: `Bearer ${token}` });
    } catch (err) {
      // A token was presented and is unusable: say so (GraphQL gives the same reason in its details).
      if (isAppError(err) && err.kind === 'UNAUTHENTICATED') throw new AppError('UNAUTHENTICATED', 'invalid token', { details: err.details });
      throw err;
    }
    if (principal) return { principal };
    throw unauthenticated('invalid token');
  }
  throw unauthenticated();
}

/** The subtopic is what follows the channel in the path, '/'-separated, each segment a plain token. */
function subtopicOf(path: string): string {
  const parts = path.split('/').slice(PREFIX_SEGMENTS).map(decodePathSegment);
  const problem = subtopicProblem(parts);
  if (problem !== null) throw invalidInput(problem);
  return parts.join('/');
}

export function registerPublishRoutes(server: HttpServer, messaging: MessagingService): void {
  const bodyLimit = messaging.settings.maxMessageBytes;
  const publish = (req: HttpRequest, subtopic: string | null): Promise<HttpReply> | HttpReply => {
    const header = req.headers.authorization;
    // 'Client ' (any case) and a key: the common case is a prefix test, not a regex.
    if (header === undefined || header.length < 8 || (!header.startsWith('Client ') && header.slice(0, 7).toLowerCase() !== 'client ')) {
      throw unauthenticated("publishing needs 'Authorization: Client <device key>'");
    }
    return messaging.publishWithKey(header.slice(7).trim(), {
      workspaceId: req.params[0] as string, channelId: req.params[1] as string, subtopic, protocol: 'http',
      payload: req.body, contentType: req.headers['content-type'] ?? '',
    }, req).then(() => ACCEPTED);
  };
  // A publish stores: it starts only once uWS parsed what came with it (see RouteOptions.startAfterParse).
  const options = { bodyLimit, headers: PUBLISH_HEADERS, startAfterParse: true };
  server.route('POST', '/http/m/:ws/c/:ch', (req) => publish(req, null), options);
  server.route('POST', '/http/m/:ws/c/:ch/*', (req) => publish(req, subtopicOf(req.path)), options);
}

// Decimal notation only: Number() alone would also take ' 10', '0x10', '1e1' and '0b1', which no client
// means as a page offset or a time and which would hide a client's encoding bug.
const DECIMAL_INTEGER = /^\d{1,16}$/;
const DECIMAL_NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

/** A query parameter when present and not empty. */
function param(params: URLSearchParams, name: string): string | undefined {
  const raw = params.get(name);
  return raw === null || raw === '' ? undefined : raw;
}

function intParam(params: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = param(params, name);
  if (raw === undefined) return fallback;
  const n = DECIMAL_INTEGER.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max)) throw invalidInput(`'${name}' must be an integer from ${min} to ${max}`);
  return n;
}

/** A decimal number (sign, fraction and exponent allowed), when present; `what` names it in the error. */
function numberParam(params: URLSearchParams, name: string, what: string): number | undefined {
  const raw = param(params, name);
  if (raw === undefined) return undefined;
  const n = DECIMAL_NUMBER.test(raw) ? Number(raw) : NaN;
  if (!Number.isFinite(n)) throw invalidInput(`'${name}' must be ${what}`);
  return n;
}

/** Which messages: by name, subtopic (exact), publishing device and protocol. */
function sourceFilters(params: URLSearchParams, q: ReadQuery): void {
  const name = param(params, 'name');
  if (name !== undefined) q.name = name;
  const subtopic = subtopicParam(params.get('subtopic'));
  if (subtopic !== null) q.subtopic = subtopic;
  const publisher = param(params, 'publisher');
  if (publisher !== undefined) q.publisherId = uuid("'publisher'", publisher);
  const protocol = param(params, 'protocol');
  if (protocol !== undefined) {
    if (!PROTOCOLS.has(protocol)) throw invalidInput("'protocol' must be http, mqtt or coap");
    q.protocol = protocol as Protocol;
  }
}

/** By value: v with a comparator (eq when none is given), vb, and the exact vs or vd. */
function valueFilters(params: URLSearchParams, q: ReadQuery): void {
  const v = numberParam(params, 'v', 'a number');
  const comparator = param(params, 'comparator');
  if (v !== undefined) {
    if (comparator !== undefined && !COMPARATORS.has(comparator)) throw invalidInput("'comparator' must be eq, lt, le, gt or ge");
    q.value = { comparator: (comparator ?? 'eq') as ValueComparator, v };
  } else if (comparator !== undefined) {
    throw invalidInput("'comparator' applies to 'v', which is missing");
  }
  const vb = param(params, 'vb');
  if (vb !== undefined) {
    if (vb !== 'true' && vb !== 'false') throw invalidInput("'vb' must be true or false");
    q.boolValue = vb === 'true';
  }
  const vs = param(params, 'vs');
  if (vs !== undefined) q.stringValue = vs;
  const vd = param(params, 'vd');
  if (vd !== undefined) q.dataValue = vd;
}

export function readQuery(query: string, limits: { defaultLimit: number; maxLimit: number }): ReadQuery {
  const params = new URLSearchParams(query);
  const q: ReadQuery = {
    offset: intParam(params, 'offset', 0, 0, 1_000_000_000),
    limit: intParam(params, 'limit', limits.defaultLimit, 1, limits.maxLimit),
  };
  sourceFilters(params, q);
  valueFilters(params, q);
  const from = numberParam(params, 'from', 'a time in seconds');
  if (from !== undefined) q.from = from;
  const to = numberParam(params, 'to', 'a time in seconds');
  if (to !== undefined) q.to = to;
  return q;
}

/** SPEC's stored message: the seven fields always; subtopic and the other value kinds when present. */
export function toReaderMessage(r: MessageRow): Record<string, unknown> {
  const m: Record<string, unknown> = {
    channel: r.channel_id, publisher: r.publisher_id, protocol: r.protocol, name: r.name, unit: r.unit, time: r.time, value: r.value,
  };
  if (r.subtopic !== null) m.subtopic = r.subtopic;
  if (r.string_value !== null) m.string_value = r.string_value;
  if (r.bool_value !== null) m.bool_value = r.bool_value;
  if (r.data_value !== null) m.data_value = r.data_value;
  if (r.sum !== null) m.sum = r.sum;
  if (r.update_time !== null) m.update_time = r.update_time;
  return m;
}

export function registerReaderRoutes(server: HttpServer, messaging: MessagingService, deps: {
  authenticate: Authenticate; authenticateDeviceKey: AuthenticateDeviceKey;
}): void {
  server.route('GET', '/:ws/channels/:ch/messages', async (req) => {
    const subject = await subjectOf(deps.authenticate, deps.authenticateDeviceKey, { authorization: req.headers.authorization }, req);
    const page = await messaging.read(subject, req.params[0] as string, req.params[1] as string, readQuery(req.query, messaging.settings.reader));
    // The page was cut at the cap as it was read; its text is measured too (escapes, numbers' digits).
    const body = JSON.stringify({ ...page, messages: page.messages.map(toReaderMessage) });
    const max = messaging.settings.reader.answerMaxBytes;
    if (!utf8Within(body, max)) throw answerTooLarge(max);
    return { status: 200, headers: JSON_HEADERS, body };
  });
}
