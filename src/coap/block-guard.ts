// Block-wise uploads (RFC 7959 Block1), reassembled here, in front of the coap package's request
// handling. The package matches blocks by token; RFC 7959 2.4 matches them by endpoint and request
// options, and clients such as libcoap's coap-client send every block with a new token, which the
// package answered 5.00 'Byte offset not the next in line'. So the package never sees a Block1 request:
// each block is answered 2.31 Continue here, and the whole body goes on as one request when its last
// block came. Uploads are bounded before anyone is authenticated: a block past the message limit answers
// 4.13 with Size1 (RFC 7959 2.9.3), each unfinished upload reserves a whole message so they never hold
// more than maxHeldBytes together (a new one past that answers 5.03), and an upload without a new block
// for timeoutMs lets its room go, so abandoned uploads cannot hold every slot for long.
import type { RemoteInfo, Socket } from 'node:dgram';
import coap from 'coap';
import { generate, type NamedOption, type ParsedPacket } from 'coap-packet';

export interface BlockLimits {
  /** Largest message an upload may assemble (the publish limit). */
  maxMessageBytes: number;
  /** Bytes all unfinished uploads together may hold: maxHeldBytes / maxMessageBytes of them at once. */
  maxHeldBytes: number;
  /** An upload whose next block has not come this long after the previous one is dropped. */
  timeoutMs: number;
}

/** An unfinished upload: its blocks so far, in order (the next one must start at `length`). */
interface Upload {
  chunks: Buffer[];
  length: number;
  lastBlockAt: number;
}

type Handle = (packet: ParsedPacket, rsinfo: RemoteInfo) => void;
/** The package's private request entry point, its socket and its reply cache (dist/lib/server.js, coap 1.x). */
interface ServerInternals {
  _handle: Handle;
  _sock?: Socket;
  _lru?: { peek(key: string): unknown };
}

/** Options that describe the transfer, not the request: left out when blocks are matched. */
const TRANSFER_OPTIONS: ReadonlySet<string> = new Set(['Block1', 'Block2', 'Size1', 'Size2']);
const EMPTY = Buffer.alloc(0);
/** Final blocks answered lately, so a retransmission gets the package's cached answer (bounded). */
const RECENT_MAX = 4096;

/** Block1 option value (0-3 bytes): NUM, M (more), SZX (size 2^(SZX+4)); SZX 7 is reserved. */
function parseBlock(value: Buffer): { num: number; more: boolean; szx: number; size: number } | null {
  if (value.length > 3) return null;
  let v = 0;
  for (const byte of value) v = (v << 8) | byte;
  const szx = v & 7;
  if (szx === 7) return null;
  return { num: v >>> 4, more: (v & 8) !== 0, szx, size: 2 ** (szx + 4) };
}

function uint(n: number): Buffer {
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return Buffer.from(bytes);
}

function readUint(value: Buffer): number {
  return value.length === 0 ? 0 : value.readUIntBE(0, Math.min(value.length, 6));
}

/** RFC 7959 2.4: blocks of one body share the endpoint, the method and every option but the block ones. */
function uploadKey(packet: ParsedPacket, rsinfo: RemoteInfo): string {
  let key = `${rsinfo.address}:${rsinfo.port} ${packet.code}`;
  for (const o of packet.options) if (!TRANSFER_OPTIONS.has(String(o.name))) key += ` ${String(o.name)}=${o.value.toString('hex')}`;
  return key;
}

export function guardBlockUploads(server: InstanceType<typeof coap.Server>, limits: BlockLimits): void {
  const internals = server as unknown as ServerInternals;
  if (typeof internals._handle !== 'function') throw new Error('coap: the server has no _handle to guard (the package changed)');
  const handle = internals._handle.bind(server);
  const capacity = Math.floor(limits.maxHeldBytes / limits.maxMessageBytes);
  const lifetimeMs = coap.parameters.exchangeLifetime * 1000;
  // Insertion order is last-block order (an upload moves to the end on each block): the stalest first.
  const uploads = new Map<string, Upload>();
  // The package's reply-cache key (address:port/messageId + token) of each reassembled request → when.
  const recentFinals = new Map<string, number>();

  function sweep(now: number): void {
    for (const [key, u] of uploads) {
      if (now - u.lastBlockAt < limits.timeoutMs) break;
      uploads.delete(key);
    }
    for (const [key, at] of recentFinals) {
      if (now - at < lifetimeMs && recentFinals.size <= RECENT_MAX) break;
      recentFinals.delete(key);
    }
  }

  /** Piggybacked on the ACK of a confirmable request (RFC 7252 5.2.1), like the package's own replies. */
  function reply(packet: ParsedPacket, rsinfo: RemoteInfo, code: string, message: string, options: NamedOption[]): void {
    const response = generate({ code, messageId: packet.messageId, token: packet.token, ack: packet.confirmable, options, payload: Buffer.from(message) });
    internals._sock?.send(response, rsinfo.port, rsinfo.address);
  }

  const tooLarge = (packet: ParsedPacket, rsinfo: RemoteInfo) => reply(packet, rsinfo, '4.13',
    `message exceeds the limit of ${limits.maxMessageBytes} bytes`, [{ name: 'Size1', value: uint(limits.maxMessageBytes) }]);
  const incomplete = (packet: ParsedPacket, rsinfo: RemoteInfo, message: string) => reply(packet, rsinfo, '4.08', message, []);
  const cont = (packet: ParsedPacket, rsinfo: RemoteInfo, block: Buffer) => reply(packet, rsinfo, '2.31', '', [{ name: 'Block1', value: block }]);

  /** The request without its transfer options, carrying `payload`: what the package handles. */
  function whole(packet: ParsedPacket, payload: Buffer): ParsedPacket {
    return { ...packet, options: packet.options.filter((o) => o.name !== 'Block1' && o.name !== 'Size1'), payload };
  }

  internals._handle = (packet, rsinfo) => {
    const option = packet.options.find((o) => o.name === 'Block1');
    // Only requests carry Block1 uploads (POST 0.02, PUT 0.03); everything else is the package's.
    if (option === undefined || (packet.code !== '0.02' && packet.code !== '0.03')) return handle(packet, rsinfo);
    const block = parseBlock(option.value);
    if (block === null) return reply(packet, rsinfo, '4.00', 'invalid Block1 option', []);
    const start = block.num * block.size;
    const length = packet.payload.length;
    const key = uploadKey(packet, rsinfo);
    const now = Date.now();
    sweep(now);
    const size1 = packet.options.find((o) => o.name === 'Size1');
    if (start + length > limits.maxMessageBytes || (size1 !== undefined && readUint(size1.value) > limits.maxMessageBytes)) {
      uploads.delete(key);
      return tooLarge(packet, rsinfo);
    }
    // Every block but the last is exactly the block size (RFC 7959 2.2); offsets are computed from it.
    if (block.more ? length !== block.size : length > block.size) {
      return reply(packet, rsinfo, '4.00', `Block1 block ${block.num} carries ${length} bytes for a block size of ${block.size}`, []);
    }

    let upload = uploads.get(key);
    if (block.num === 0) {
      // A first block starts the body afresh, whatever an earlier attempt with these options left.
      if (!block.more) {
        uploads.delete(key);
        return handle(whole(packet, packet.payload), rsinfo);
      }
      if (upload === undefined && uploads.size >= capacity) {
        return reply(packet, rsinfo, '5.03', 'too many block-wise uploads in progress', [{ name: 'Max-Age', value: uint(5) }]);
      }
      upload = { chunks: [packet.payload], length, lastBlockAt: now };
    } else if (upload === undefined) {
      const cacheKey = `${rsinfo.address}:${rsinfo.port}/${packet.messageId}${packet.token.toString('hex')}`;
      if (!block.more && recentFinals.has(cacheKey)) {
        // The last block again (its answer was lost): the package resends its cached answer; while the
        // request is still being handled there is none yet, and the retransmission is dropped.
        if (internals._lru?.peek(cacheKey) !== undefined) handle(whole(packet, EMPTY), rsinfo);
        return;
      }
      return incomplete(packet, rsinfo, `Block1 block ${block.num} has no preceding blocks`);
    } else if (start < upload.length) {
      // A block sent again (its 2.31 was lost) is answered again, and not added twice.
      if (block.more && start + length <= upload.length) {
        upload.lastBlockAt = now;
        uploads.delete(key);
        uploads.set(key, upload);
        return cont(packet, rsinfo, option.value);
      }
      return incomplete(packet, rsinfo, `Block1 block ${block.num} overlaps the blocks received`);
    } else if (start > upload.length) {
      return incomplete(packet, rsinfo, `Block1 block ${block.num} does not follow the blocks received (next byte ${upload.length})`);
    } else {
      upload.chunks.push(packet.payload);
      upload.length += length;
      upload.lastBlockAt = now;
    }
    uploads.delete(key);
    if (block.more) {
      uploads.set(key, upload);
      return cont(packet, rsinfo, option.value);
    }
    recentFinals.set(`${rsinfo.address}:${rsinfo.port}/${packet.messageId}${packet.token.toString('hex')}`, now);
    handle(whole(packet, Buffer.concat(upload.chunks, upload.length)), rsinfo);
  };
}
