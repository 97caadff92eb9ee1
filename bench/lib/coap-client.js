// Owns a minimal CoAP client (RFC 7252) for the soak: confirmable POSTs of a SenML pack over one UDP
// socket, answered by a piggybacked ACK. A lost datagram is sent again with the same message id (the
// server answers a duplicate from its cache, so a retransmission never publishes twice), on the RFC's
// schedule shortened for loopback: 1 s, then doubling, MAX_RETRANSMIT 4 times. A slow answer comes as an
// empty ACK and later a separate response, matched by token (and acknowledged when confirmable).
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';

const ACK_TIMEOUT_MS = 1000;
const MAX_RETRANSMIT = 4;
const SEPARATE_RESPONSE_TIMEOUT_MS = 30_000;
const CON = 0;
const ACK = 2;
const RST = 3;
const POST = 0x02;
const OPTION_URI_PATH = 11;
const OPTION_CONTENT_FORMAT = 12;
const OPTION_URI_QUERY = 15;
const SENML_JSON = 110;

/** One option's delta/length nibble with its extension bytes (RFC 7252 3.1). */
function nibble(/** @type {number} */ n) {
  if (n < 13) return { bits: n, ext: Buffer.alloc(0) };
  if (n < 269) return { bits: 13, ext: Buffer.from([n - 13]) };
  return { bits: 14, ext: Buffer.from([(n - 269) >> 8, (n - 269) & 0xff]) };
}

/** Options in ascending number order, delta-encoded. @param {[number, Buffer][]} options */
function encodeOptions(options) {
  const parts = [];
  let previous = 0;
  for (const [number, value] of options) {
    const delta = nibble(number - previous);
    const length = nibble(value.length);
    parts.push(Buffer.from([(delta.bits << 4) | length.bits]), delta.ext, length.ext, value);
    previous = number;
  }
  return Buffer.concat(parts);
}

/** "2.04" from a code byte. */
export const codeText = (/** @type {number} */ code) => `${code >> 5}.${String(code & 0x1f).padStart(2, '0')}`;

/**
 * A client bound to one server: post(path segments, query, payload) resolves with the answer's code
 * ("2.04", "5.03", ...) or rejects after the last retransmission went unanswered.
 * @param {number} port
 */
export function createCoapClient(port) {
  const socket = dgram.createSocket('udp4');
  let nextId = randomBytes(2).readUInt16BE(0);
  /** @typedef {{resolve: (code: string) => void, reject: (err: Error) => void, timer: NodeJS.Timeout | null, id: number, token: string}} Waiter */
  /** @type {Map<number, Waiter>} by message id, until the request is acknowledged */
  const byId = new Map();
  /** @type {Map<string, Waiter>} by token, until the response arrives (piggybacked or separate) */
  const byToken = new Map();
  const settle = (/** @type {Waiter} */ w) => {
    if (w.timer) clearTimeout(w.timer);
    byId.delete(w.id);
    byToken.delete(w.token);
  };
  socket.on('message', (msg) => {
    if (msg.length < 4) return;
    const type = (/** @type {number} */ (msg[0]) >> 4) & 0x03;
    const tokenLength = /** @type {number} */ (msg[0]) & 0x0f;
    const code = /** @type {number} */ (msg[1]);
    const id = msg.readUInt16BE(2);
    if (type === ACK || type === RST) {
      const w = byId.get(id);
      if (!w) return;
      if (type === RST) {
        settle(w);
        return w.reject(new Error('CoAP reset'));
      }
      if (code === 0) {
        // An empty ACK: the server took the request and answers later in a separate response (RFC 7252
        // 5.2.2). Stop retransmitting; wait for the response by token.
        byId.delete(id);
        if (w.timer) clearTimeout(w.timer);
        w.timer = setTimeout(() => {
          settle(w);
          w.reject(new Error('CoAP separate response timeout'));
        }, SEPARATE_RESPONSE_TIMEOUT_MS);
        return;
      }
      settle(w);
      return w.resolve(codeText(code));
    }
    // A separate response (CON or NON) to one of ours: acknowledged if confirmable, matched by token.
    if (type === CON) socket.send(Buffer.from([0x40 | (ACK << 4), 0, id >> 8, id & 0xff]), port, '127.0.0.1');
    const w = byToken.get(msg.subarray(4, 4 + tokenLength).toString('hex'));
    if (!w || code < 64) return;
    settle(w);
    w.resolve(codeText(code));
  });
  socket.unref();

  /** @param {string[]} segments @param {string} query @param {string} payload */
  function post(segments, query, payload) {
    const id = nextId;
    nextId = (nextId + 1) & 0xffff;
    const token = randomBytes(4);
    const options = /** @type {[number, Buffer][]} */ ([
      ...segments.map((s) => /** @type {[number, Buffer]} */ ([OPTION_URI_PATH, Buffer.from(s)])),
      [OPTION_CONTENT_FORMAT, Buffer.from([SENML_JSON])],
      [OPTION_URI_QUERY, Buffer.from(query)],
    ]);
    const head = Buffer.from([0x40 | (CON << 4) | token.length, POST, id >> 8, id & 0xff]);
    const datagram = Buffer.concat([head, token, encodeOptions(options), Buffer.from([0xff]), Buffer.from(payload)]);
    return new Promise((resolve, reject) => {
      /** @type {Waiter} */
      const w = { resolve, reject, timer: null, id, token: token.toString('hex') };
      byId.set(id, w);
      byToken.set(w.token, w);
      let attempt = 0;
      const send = () => {
        socket.send(datagram, port, '127.0.0.1');
        w.timer = setTimeout(() => {
          if (!byId.has(id)) return;
          if (attempt++ < MAX_RETRANSMIT) return send();
          settle(w);
          reject(new Error('CoAP timeout'));
        }, ACK_TIMEOUT_MS * 2 ** attempt);
      };
      send();
    });
  }

  return { post, close: () => socket.close() };
}
