// Owns the MQTT QoS 1 load generator: a child process of N raw-TCP MQTT 3.1.1 clients, each keeping
// `inflight` PUBLISHes (one SenML record each) in flight, a new one sent for every PUBACK. Frames are
// pre-encoded and written a chunk at a time, so the generator costs a few µs per message and the server,
// not the client library, decides the rate (mqtt.js costs more per message than the broker it measures).
import { fork } from 'node:child_process';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import hdr from 'hdr-histogram-js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * @typedef {object} MqttLoadSpec
 * @property {number} port
 * @property {{clientId: string, username?: string, password?: string, topic: string}[]} clients
 * @property {string} payload
 * @property {number} inflight
 * @property {number} warmupSeconds
 * @property {number} durationSeconds
 */

/**
 * @param {MqttLoadSpec & {onWindowStart: (pid: number) => void, onWindowEnd: (pid: number) => void}} spec
 * @returns {Promise<{requests: number, wallSeconds: number, reqPerSec: number, p50Us: number, p99Us: number, maxUs: number, errors: number, acknowledged: number, sent: number, errorDetail: string[]}>}
 */
export function runMqttLoad({ onWindowStart, onWindowEnd, ...spec }) {
  const child = fork(selfPath, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pid = /** @type {number} */ (child.pid);
  return new Promise((resolve, reject) => {
    child.on('message', (/** @type {any} */ m) => {
      if (m.type === 'window-start') onWindowStart(pid);
      else if (m.type === 'window-end') onWindowEnd(pid);
      else if (m.type === 'result') resolve(m.result);
      else if (m.type === 'failed') reject(new Error(m.message));
    });
    child.once('exit', (code) => reject(new Error(`mqtt load generator exited with ${code}`)));
    child.send(spec);
  });
}

/** MQTT variable-length Remaining Length (2.2.3). */
function remainingLength(/** @type {number} */ n) {
  const out = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return Buffer.from(out);
}

const str = (/** @type {string} */ s) => {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
};

/** CONNECT, MQTT 3.1.1, clean session, keep-alive 60 s. */
export function encodeConnect(/** @type {{clientId: string, username?: string, password?: string}} */ c) {
  let flags = 0x02;
  const payload = [str(c.clientId)];
  if (c.username !== undefined) {
    flags |= 0x80;
    payload.push(str(c.username));
  }
  if (c.password !== undefined) {
    flags |= 0x40;
    payload.push(str(c.password));
  }
  const body = Buffer.concat([str('MQTT'), Buffer.from([4, flags, 0, 60]), ...payload]);
  return Buffer.concat([Buffer.from([0x10]), remainingLength(body.length), body]);
}

/** A QoS 1 PUBLISH with packet id 0, and the offset of its packet id. */
export function encodePublishTemplate(/** @type {string} */ topic, /** @type {string} */ payload) {
  const t = str(topic);
  const p = Buffer.from(payload, 'utf8');
  const rest = t.length + 2 + p.length;
  const head = Buffer.concat([Buffer.from([0x32]), remainingLength(rest)]);
  return { frame: Buffer.concat([head, t, Buffer.from([0, 0]), p]), idOffset: head.length + t.length };
}

/** @param {MqttLoadSpec} spec */
async function generate(spec) {
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let phase = /** @type {'warmup' | 'window' | 'draining'} */ ('warmup');
  let inWindow = 0;
  let acknowledged = 0;
  let sent = 0;
  let errors = 0;
  /** @type {string[]} */
  const errorDetail = [];
  let outstanding = 0;
  /** @type {(() => void) | null} */
  let drained = null;

  const conns = await Promise.all(spec.clients.map((c) => new Promise((resolve, reject) => {
    const socket = net.connect(spec.port, '127.0.0.1');
    socket.setNoDelay(true);
    const { frame, idOffset } = encodePublishTemplate(c.topic, spec.payload);
    const conn = { socket, frame, idOffset, nextId: 1, sentAt: new Float64Array(65536), pending: Buffer.alloc(0), connected: false, inflight: 0, closed: false };
    socket.once('connect', () => socket.write(encodeConnect(c)));
    socket.on('error', (err) => {
      if (!conn.connected) reject(err);
      else if (errorDetail.length < 10) errorDetail.push(String(err.message));
    });
    socket.on('close', () => {
      conn.closed = true;
      if (!conn.connected) return reject(new Error('closed before CONNACK'));
      if (conn.inflight > 0) {
        errors += conn.inflight;
        outstanding -= conn.inflight;
        conn.inflight = 0;
        if (phase === 'draining' && outstanding === 0) drained?.();
      }
    });
    socket.on('data', (/** @type {Buffer} */ chunk) => {
      let buf = conn.pending.length ? Buffer.concat([conn.pending, chunk]) : chunk;
      let off = 0;
      let acks = 0;
      const now = performance.now();
      while (off + 2 <= buf.length) {
        // Remaining Length: at most 4 bytes.
        let len = 0;
        let mul = 1;
        let i = off + 1;
        let complete = false;
        for (; i < buf.length && i < off + 5; i++) {
          const b = /** @type {number} */ (buf[i]);
          len += (b & 0x7f) * mul;
          mul *= 128;
          if ((b & 0x80) === 0) { complete = true; i++; break; }
        }
        if (!complete || i + len > buf.length) break;
        const type = /** @type {number} */ (buf[off]) >> 4;
        if (type === 2) {
          if (buf[i + 1] !== 0) {
            errorDetail.push(`CONNACK return code ${buf[i + 1]}`);
            return void reject(new Error(`CONNACK refused: return code ${buf[i + 1]}`));
          }
          conn.connected = true;
          resolve(conn);
        } else if (type === 4) {
          const id = (/** @type {number} */ (buf[i]) << 8) | /** @type {number} */ (buf[i + 1]);
          acks++;
          conn.inflight--;
          outstanding--;
          acknowledged++;
          if (phase === 'window') {
            inWindow++;
            hist.recordValue(Math.max(1, Math.round((now - /** @type {number} */ (conn.sentAt[id])) * 1000)));
          }
        }
        off = i + len;
      }
      conn.pending = off < buf.length ? Buffer.from(buf.subarray(off)) : Buffer.alloc(0);
      if (acks > 0) {
        if (phase === 'draining') {
          if (outstanding === 0) drained?.();
        } else send(conn, acks);
      }
    });
  })));

  /** Writes n PUBLISHes in one buffer (a fresh one: the socket may still hold the previous). */
  function send(/** @type {any} */ conn, /** @type {number} */ n) {
    if (conn.closed) return;
    const len = conn.frame.length;
    const out = Buffer.allocUnsafe(len * n);
    const now = performance.now();
    for (let k = 0; k < n; k++) {
      const at = k * len;
      conn.frame.copy(out, at);
      const id = conn.nextId;
      conn.nextId = id === 65535 ? 1 : id + 1;
      out[at + conn.idOffset] = id >> 8;
      out[at + conn.idOffset + 1] = id & 0xff;
      conn.sentAt[id] = now;
    }
    conn.inflight += n;
    outstanding += n;
    sent += n;
    conn.socket.write(out);
  }

  for (const conn of conns) send(conn, spec.inflight);
  await new Promise((r) => setTimeout(r, spec.warmupSeconds * 1000));
  /** @type {any} */ (process).send({ type: 'window-start' });
  const start = performance.now();
  phase = 'window';
  await new Promise((r) => setTimeout(r, spec.durationSeconds * 1000));
  // Every connection's last publishes are awaited, never cut: they count in the window.
  phase = 'draining';
  if (outstanding > 0) await new Promise((r) => { drained = () => r(undefined); });
  const wallSeconds = (performance.now() - start) / 1000;
  /** @type {any} */ (process).send({ type: 'window-end' });
  await Promise.all(conns.map((c) => new Promise((r) => {
    if (c.closed) return r(undefined);
    c.socket.end(Buffer.from([0xe0, 0]), () => r(undefined));
  })));
  return {
    requests: inWindow, wallSeconds, reqPerSec: inWindow / wallSeconds, p50Us: hist.getValueAtPercentile(50), p99Us: hist.getValueAtPercentile(99),
    maxUs: hist.maxValue, errors, acknowledged, sent, errorDetail,
  };
}

if (process.argv[1] === selfPath && process.send) {
  process.once('message', (/** @type {any} */ spec) => {
    generate(spec).then(
      (result) => /** @type {any} */ (process).send({ type: 'result', result }, () => process.exit(0)),
      (err) => /** @type {any} */ (process).send({ type: 'failed', message: String(err?.stack ?? err) }, () => process.exit(1)),
    );
  });
}
