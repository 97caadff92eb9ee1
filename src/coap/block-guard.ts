// Bounds on block-wise uploads (RFC 7959 Block1). The coap package reassembles them before any handler
// runs, before the ?auth key is read, and trusts the client's block numbers: a single 31-byte datagram
// whose last block is numbered 2^20 - 1 makes it allocate a gigabyte, and blocks of uploads that never
// finish stay cached for EXCHANGE_LIFETIME (247 s) without any bound. This guard sits in front of the
// package's request handling. Each unfinished upload reserves a whole message (maxMessageBytes) until
// the package lets its blocks go, so they never hold more than maxHeldBytes together: a new upload past
// that answers 5.03, and a block that would carry an upload past the message limit 4.13 with Size1
// (RFC 7959 2.9.3).
import type { RemoteInfo, Socket } from 'node:dgram';
import coap from 'coap';
import { generate, type NamedOption, type ParsedPacket } from 'coap-packet';

export interface BlockLimits {
  /** Largest message an upload may assemble (the publish limit). */
  maxMessageBytes: number;
  /** Bytes all unfinished uploads together may hold: maxHeldBytes / maxMessageBytes of them at once. */
  maxHeldBytes: number;
}

/** An unfinished upload: the bytes of each block the package holds for it, by byte offset. */
interface Upload {
  blocks: Map<number, number>;
  bytes: number;
  lastBlockAt: number;
}

type Handle = (packet: ParsedPacket, rsinfo: RemoteInfo) => void;
/** The package's private request entry point (dist/lib/server.js, coap 1.x) and its socket. */
interface ServerInternals {
  _handle: Handle;
  _sock?: Socket;
}

/** Block1 option value (0-3 bytes): NUM, M (more), SZX (size 2^(SZX+4)); SZX 7 is reserved. */
function parseBlock(value: Buffer): { num: number; more: boolean; size: number } | null {
  if (value.length > 3) return null;
  let v = 0;
  for (const byte of value) v = (v << 8) | byte;
  const szx = v & 7;
  if (szx === 7) return null;
  return { num: v >>> 4, more: (v & 8) !== 0, size: 2 ** (szx + 4) };
}

function uint(n: number): Buffer {
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return Buffer.from(bytes);
}

export function guardBlockUploads(server: InstanceType<typeof coap.Server>, limits: BlockLimits): void {
  const internals = server as unknown as ServerInternals;
  if (typeof internals._handle !== 'function') throw new Error('coap: the server has no _handle to guard (the package changed)');
  const handle = internals._handle.bind(server);
  const lifetimeMs = coap.parameters.exchangeLifetime * 1000;
  const capacity = Math.floor(limits.maxHeldBytes / limits.maxMessageBytes);
  // Insertion order is last-block order (an upload moves to the end on each block): the oldest first.
  const uploads = new Map<string, Upload>();

  /** The package forgets an upload's blocks EXCHANGE_LIFETIME after they came: so does the guard. */
  function sweep(now: number): void {
    for (const [key, u] of uploads) {
      if (now - u.lastBlockAt < lifetimeMs) break;
      uploads.delete(key);
    }
  }

  /** Piggybacked on the ACK of a confirmable request (RFC 7252 5.2.1), like the package's own replies. */
  function reply(packet: ParsedPacket, rsinfo: RemoteInfo, code: string, message: string, options: NamedOption[]): void {
    const response = generate({ code, messageId: packet.messageId, token: packet.token, ack: packet.confirmable, options, payload: Buffer.from(message) });
    internals._sock?.send(response, rsinfo.port, rsinfo.address);
  }

  const tooLarge = (packet: ParsedPacket, rsinfo: RemoteInfo) => reply(packet, rsinfo, '4.13',
    `message exceeds the limit of ${limits.maxMessageBytes} bytes`, [{ name: 'Size1', value: uint(limits.maxMessageBytes) }]);

  internals._handle = (packet, rsinfo) => {
    const option = packet.options.find((o) => o.name === 'Block1');
    // Only requests carry Block1 uploads (POST 0.02, PUT 0.03); everything else is the package's.
    if (option === undefined || (packet.code !== '0.02' && packet.code !== '0.03')) return handle(packet, rsinfo);
    const block = parseBlock(option.value);
    if (block === null) return reply(packet, rsinfo, '4.00', 'invalid Block1 option', []);
    const start = block.num * block.size;
    const length = packet.payload.length;
    // Refused blocks leave the upload's reservation as it was: the package still holds its earlier blocks.
    if (start + length > limits.maxMessageBytes) return tooLarge(packet, rsinfo);
    const key = `${rsinfo.address}:${rsinfo.port}/${packet.token.toString('hex')}`;
    const now = Date.now();
    sweep(now);
    let upload = uploads.get(key);
    if (upload === undefined && block.more) {
      if (uploads.size >= capacity) return reply(packet, rsinfo, '5.03', 'too many block-wise uploads in progress', [{ name: 'Max-Age', value: uint(5) }]);
      upload = { blocks: new Map(), bytes: 0, lastBlockAt: now };
    }
    if (upload !== undefined) {
      // A block sent again replaces itself in the package's cache; blocks at overlapping offsets add up.
      const bytes = upload.bytes - (upload.blocks.get(start) ?? 0) + length;
      if (bytes > limits.maxMessageBytes) return tooLarge(packet, rsinfo);
      upload.blocks.set(start, length);
      upload.bytes = bytes;
      upload.lastBlockAt = now;
      uploads.delete(key);
      uploads.set(key, upload);
    }
    if (block.more) return handle(packet, rsinfo);
    // The last block: the package reassembles the upload and drops its blocks, or throws (a block is
    // missing) and keeps them until they expire, and the reservation with them.
    handle(packet, rsinfo);
    uploads.delete(key);
  };
}
