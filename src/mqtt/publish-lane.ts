// The framed PUBLISH path of MQTT 3.1/3.1.1 connections: once aedes has connected a client, its socket's
// bytes are read here; a plain QoS 0/1 PUBLISH (no retain, a valid topic) is cut from the frame directly
// and goes through the same authorizePublish hook aedes calls, its PUBACK written (with the others of the
// same turn, one write per client) only after the hook answered, i.e. after the message's batch committed,
// in arrival order. Every other frame (SUBSCRIBE, PINGREQ, QoS 2, retained, malformed, oversized) is handed
// whole to aedes' own parser, after the lane's PUBLISHes were answered, so aedes keeps every rule it
// enforces. Why: aedes' per-packet machinery (stream parser, handler series, debug calls, one write per
// PUBACK) cost about as much CPU per message as storing it (bench/results/HISTORY.md, issue 37).
import type { Duplex } from 'node:stream';
import type { Client, PublishPacket } from 'aedes';

/** What the lane needs of aedes' client (pinned aedes: these are its fields). */
interface LaneClient {
  conn: Duplex;
  closed: boolean;
  connected: boolean;
  version: number | null;
  _paused?: boolean;
  _parsingBatch: number;
  _nextBatch: (err?: Error | null) => void;
  _parser: { parse(buf: Buffer): unknown; _queue: unknown[] | null; _list?: { length: number } };
  _keepaliveInterval: number;
  _keepaliveTimer: { refresh(): void } | null;
  emit(event: 'error', err: Error): boolean;
}

export interface LaneDeps {
  /** The broker's authorizePublish hook: stores the message (or refuses it), then calls done. */
  authorizePublish(client: Client, packet: PublishPacket, done: (err?: Error | null) => void): void;
  /** A refusal acknowledged under the 'ignore' action: PUBACKed, never forwarded. */
  isDropped(packet: object): boolean;
  /** Forwards a stored message to subscribers (aedes' publish, unwrapped). */
  forward(packet: PublishPacket, client: Client): void;
  /** Largest frame accepted, bytes on the wire. */
  maxPacketBytes: number;
  maxTopicLevels: number;
  /** Counts an inbound packet (broker stats), and each PUBACK written. */
  packetIn(packet: { cmd: string; qos?: number }): void;
  packetOut(publish: boolean): void;
}

/** PUBLISHes of one connection stored or being stored and not yet answered, before reading stops. */
const MAX_PENDING = 1024;
const PUBACK = 0x40;

/** Connections whose PUBACKs of this turn wait to be written; flushed once per turn. */
const dirty = new Set<Lane>();
let flushScheduled = false;

function flushAll(): void {
  flushScheduled = false;
  for (const lane of dirty) lane.flushAcks();
  dirty.clear();
}

interface Lane {
  flushAcks(): void;
}

/**
 * Takes over reading the client's socket when it is an MQTT 3.1/3.1.1 client whose CONNECT aedes completed
 * and aedes holds no partial frame (else aedes keeps the connection: correct, just not on this path).
 * Call on aedes' 'clientReady' event. Returns whether the lane took over.
 */
export function attachPublishLane(aedesClient: Client, deps: LaneDeps): boolean {
  const client = aedesClient as unknown as LaneClient;
  if (client.version !== 3 && client.version !== 4) return false;
  if (client.closed || (client._parser._list?.length ?? 0) > 0) return false;
  const conn = client.conn;
  const original = client._nextBatch;
  /** Unconsumed bytes (at most one partial frame after a pump). */
  let pending: Buffer | null = null;
  /** PUBLISHes of this lane not yet answered; aedes packets not yet done. */
  let fastPending = 0;
  let aedesPending = client._parser._queue?.length ?? 0;
  /** PUBACK packet ids waiting for this turn's write. */
  let acks: number[] = [];
  let lastTopicBytes: Buffer | null = null;
  let lastTopic = '';
  let stopped = false;
  let pumping = false;
  let again = false;
  const readAhead = deps.maxPacketBytes + 65536;

  const lane: Lane = {
    flushAcks() {
      if (acks.length === 0) return;
      const ids = acks;
      acks = [];
      if (client.closed || conn.destroyed) return;
      const out = Buffer.allocUnsafe(ids.length * 4);
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i] as number;
        const at = i * 4;
        out[at] = PUBACK;
        out[at + 1] = 2;
        out[at + 2] = id >> 8;
        out[at + 3] = id & 0xff;
        deps.packetOut(false);
      }
      conn.write(out);
    },
  };

  // The original reader stays attached to nothing: the CONNECT's own completion calls it once more, and
  // paused it returns without reading (aedes reads nothing while paused; only its resume() unpauses,
  // and that calls client._nextBatch, which is the lane's from here on).
  client._paused = true;
  conn.removeListener('readable', original);
  client._nextBatch = (err) => {
    // A packet handed to aedes is done.
    client._parsingBatch = Math.max(0, client._parsingBatch - 1);
    client._paused = true;
    if (err) {
      stopped = true;
      client.emit('error', err);
      return;
    }
    if (aedesPending > 0) aedesPending--;
    pump();
  };
  conn.on('readable', pump);
  setImmediate(pump);

  function answered(packet: PublishPacket, err?: Error | null): void {
    fastPending--;
    if (err) {
      // As aedes does with a hook's error: the connection is closed, no PUBACK.
      stopped = true;
      client.emit('error', err);
      return;
    }
    if (packet.qos === 1) {
      acks.push(packet.messageId as number);
      dirty.add(lane);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushAll);
      }
    }
    if (!deps.isDropped(packet)) deps.forward(packet, aedesClient);
    if (fastPending === 0 || fastPending === MAX_PENDING - 1) pump();
  }

  function handOver(frame: Buffer): void {
    // aedes may answer at once (PINGRESP, a PUBACK): the lane's answers go out first, in their order.
    lane.flushAcks();
    aedesPending++;
    client._parser.parse(frame);
  }

  /**
   * Reads and dispatches what can go now. Never re-entered (aedes may finish a handed-over packet
   * synchronously): a nested call only asks the running one to go round again, so frames keep their order.
   */
  function pump(): void {
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        pumpOnce();
      } while (again);
    } finally {
      pumping = false;
    }
  }

  function pumpOnce(): void {
    if (stopped || client.closed) return;
    let buf = pending;
    pending = null;
    // Read only while frames can go: a frame waiting for earlier answers holds at most readAhead bytes here.
    while (aedesPending === 0 && fastPending < MAX_PENDING && (buf === null || buf.length < readAhead)) {
      const chunk = conn.read() as Buffer | null;
      if (chunk === null) break;
      buf = buf === null ? chunk : Buffer.concat([buf, chunk]);
    }
    if (buf === null) return;
    let off = 0;
    let any = false;
    while (off < buf.length && !stopped && !client.closed) {
      const header = buf[off] as number;
      // Remaining Length: 1-4 bytes (2.2.3).
      let len = 0;
      let mul = 1;
      let i = off + 1;
      let complete = false;
      for (; i < buf.length && i < off + 5; i++) {
        const b = buf[i] as number;
        len += (b & 0x7f) * mul;
        mul *= 128;
        if ((b & 0x80) === 0) {
          complete = true;
          i++;
          break;
        }
      }
      if (!complete) {
        // A fifth length byte is malformed: aedes' parser says so and closes the connection.
        if (i - off >= 5) return void handOverRest(buf.subarray(off));
        break;
      }
      const size = i - off + len;
      if (size > deps.maxPacketBytes) {
        // Refused at its header, never buffered whole: aedes' own rejection (3.1.1: the connection closes).
        stopped = true;
        (aedesClient as unknown as { rejectPacketTooLarge(size: number): void }).rejectPacketTooLarge(size);
        return;
      }
      if (i + len > buf.length) break;
      const frame = buf.subarray(off, i + len);
      const type = header >> 4;
      const qos = (header >> 1) & 3;
      const fast = type === 3 && qos < 2 && (header & 1) === 0 ? publishOf(frame, i - off, qos, (header & 8) !== 0) : null;
      if (fast !== null) {
        if (aedesPending > 0) break;
        any = true;
        fastPending++;
        deps.packetIn(fast);
        deps.authorizePublish(aedesClient, fast, (err) => answered(fast, err));
      } else {
        if (fastPending > 0) break;
        any = true;
        handOver(Buffer.from(frame));
      }
      off = i + len;
      if (fastPending >= MAX_PENDING) break;
    }
    if (off < buf.length) pending = off === 0 ? buf : Buffer.from(buf.subarray(off));
    if (any && client._keepaliveInterval > 0) client._keepaliveTimer?.refresh();
  }

  function handOverRest(rest: Buffer): void {
    stopped = true;
    lane.flushAcks();
    aedesPending++;
    client._parser.parse(Buffer.from(rest));
  }

  /**
   * The PUBLISH, when this path may take it: QoS 0/1, not retained, a topic that is valid UTF-8 without
   * wildcards, NUL or too many levels. Anything else is null and goes to aedes, which applies its rules.
   */
  function publishOf(frame: Buffer, start: number, qos: number, dup: boolean): PublishPacket | null {
    if (start + 2 > frame.length) return null;
    const topicLength = ((frame[start] as number) << 8) | (frame[start + 1] as number);
    const topicStart = start + 2;
    const topicEnd = topicStart + topicLength;
    const idEnd = qos > 0 ? topicEnd + 2 : topicEnd;
    if (topicLength === 0 || idEnd > frame.length) return null;
    const topicBytes = frame.subarray(topicStart, topicEnd);
    let topic: string;
    if (lastTopicBytes !== null && topicBytes.equals(lastTopicBytes)) topic = lastTopic;
    else {
      topic = topicBytes.toString('utf8');
      if (!validTopic(topic, deps.maxTopicLevels)) return null;
      lastTopicBytes = Buffer.from(topicBytes);
      lastTopic = topic;
    }
    const messageId = qos > 0 ? ((frame[topicEnd] as number) << 8) | (frame[topicEnd + 1] as number) : undefined;
    // A QoS 1 PUBLISH with packet id 0 is a protocol violation: aedes' parser refuses it.
    if (qos > 0 && messageId === 0) return null;
    return {
      cmd: 'publish', topic, payload: frame.subarray(idEnd), qos: qos as 0 | 1, retain: false, dup,
      ...(messageId !== undefined ? { messageId } : {}),
    } as PublishPacket;
  }
  return true;
}

/** A topic name aedes would accept for PUBLISH, decoded without replacement characters. */
function validTopic(topic: string, maxLevels: number): boolean {
  if (topic.includes('#') || topic.includes('+') || topic.includes('\u0000') || topic.includes('\uFFFD')) return false;
  let levels = 1;
  for (let i = 0; i < topic.length; i++) if (topic.charCodeAt(i) === 47) levels++;
  return levels <= maxLevels;
}
