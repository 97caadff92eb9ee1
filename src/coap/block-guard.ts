// Bounds on block-wise uploads (RFC 7959 Block1). The coap package reassembles them before any handler
// runs, before the ?auth key is read, and trusts the client's block numbers: a single 31-byte datagram
// whose last block is numbered 2^20 - 1 makes it allocate a gigabyte, and blocks of transfers that never
// finish stay cached for EXCHANGE_LIFETIME (247 s) without any bound. This guard sits in front of the
// package's request handling: a block that would carry the upload past the message limit is refused
// with 4.13 and Size1 (RFC 7959 2.9.3), a new transfer while the unfinished ones hold too much with 5.03.
import type { RemoteInfo, Socket } from 'node:dgram';
import coap from 'coap';
import { generate, type NamedOption, type ParsedPacket } from 'coap-packet';

export interface BlockLimits {
  /** Largest message a transfer may assemble (the publish limit). */
  maxMessageBytes: number;
  /** Bytes all unfinished transfers together may hold before new ones are turned away. */
  maxHeldBytes: number;
}

interface Transfer {
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
  // Insertion order is last-block order (a transfer is moved to the end on each block): the oldest first.
  const transfers = new Map<string, Transfer>();
  let held = 0;

  function forget(key: string): void {
    const t = transfers.get(key);
    if (t === undefined) return;
    held -= t.bytes;
    transfers.delete(key);
  }

  function sweep(now: number): void {
    for (const [key, t] of transfers) {
      if (now - t.lastBlockAt < lifetimeMs) break;
      forget(key);
    }
  }

  /** Piggybacked on the ACK of a confirmable request (RFC 7252 5.2.1), like the package's own replies. */
  function reply(packet: ParsedPacket, rsinfo: RemoteInfo, code: string, message: string, options: NamedOption[]): void {
    const response = generate({ code, messageId: packet.messageId, token: packet.token, ack: packet.confirmable, options, payload: Buffer.from(message) });
    internals._sock?.send(response, rsinfo.port, rsinfo.address);
  }

  internals._handle = (packet, rsinfo) => {
    const option = packet.options.find((o) => o.name === 'Block1');
    // Only requests carry Block1 uploads (POST 0.02, PUT 0.03); everything else is the package's.
    if (option === undefined || (packet.code !== '0.02' && packet.code !== '0.03')) return handle(packet, rsinfo);
    const block = parseBlock(option.value);
    if (block === null) return reply(packet, rsinfo, '4.00', 'invalid Block1 option', []);
    const key = `${rsinfo.address}:${rsinfo.port}/${packet.token.toString('hex')}`;
    if (block.num * block.size + packet.payload.length > limits.maxMessageBytes) {
      forget(key);
      return reply(packet, rsinfo, '4.13', `message exceeds the limit of ${limits.maxMessageBytes} bytes`,
        [{ name: 'Size1', value: uint(limits.maxMessageBytes) }]);
    }
    const now = Date.now();
    sweep(now);
    const known = transfers.get(key);
    if (!block.more) {
      forget(key);
      return handle(packet, rsinfo);
    }
    const bytes = packet.payload.length;
    if (known === undefined && held + bytes > limits.maxHeldBytes) {
      return reply(packet, rsinfo, '5.03', 'too many block-wise uploads in progress', [{ name: 'Max-Age', value: uint(5) }]);
    }
    forget(key);
    const t = { bytes: (known?.bytes ?? 0) + bytes, lastBlockAt: now };
    transfers.set(key, t);
    held += t.bytes;
    handle(packet, rsinfo);
  };
}
