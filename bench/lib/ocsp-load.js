// Owns the OCSP load generator: a child process of N closed loops over raw TCP, each sending one DER
// OCSPRequest per HTTP request, on a new connection per request (as OpenSSL's responder forces) or on one
// kept-alive connection, optionally with a fresh nonce per request. Every request is sent whole: OpenSSL
// 3.0's responder spins at 100% forever after a client connects and leaves without sending.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import hdr from 'hdr-histogram-js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * @typedef {object} OcspLoadSpec
 * @property {number} port
 * @property {string} path
 * @property {string[]} requests base64 DER OCSPRequests without nonce, cycled through
 * @property {'close' | 'keepalive'} mode
 * @property {boolean} nonce add a fresh nonce to every request
 * @property {'1.0' | '1.1'} http
 * @property {number} connections
 * @property {number} warmupSeconds
 * @property {number} durationSeconds
 * @property {boolean} [anyAnswer] count any complete HTTP answer (the floor answers 202 with no body)
 */

/**
 * @param {OcspLoadSpec & {onWindowStart: (pid: number) => void, onWindowEnd: (pid: number) => void}} spec
 * @returns {Promise<any>}
 */
export function runOcspLoad({ onWindowStart, onWindowEnd, ...spec }) {
  const child = fork(selfPath, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pid = /** @type {number} */ (child.pid);
  return new Promise((resolve, reject) => {
    child.on('message', (/** @type {any} */ m) => {
      if (m.type === 'window-start') onWindowStart(pid);
      else if (m.type === 'window-end') onWindowEnd(pid);
      else if (m.type === 'result') resolve(m.result);
    });
    child.once('exit', (code) => reject(new Error(`ocsp load generator exited with ${code}`)));
    child.send(spec);
  });
}

/** DER TLV with a definite length. */
function enc(/** @type {number} */ tag, /** @type {Buffer} */ content) {
  const n = content.length;
  const len = n < 128 ? Buffer.from([n]) : n < 256 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

/** Offset of the content and its end, for the TLV at `off`. */
function tlv(/** @type {Buffer} */ b, /** @type {number} */ off) {
  const first = /** @type {number} */ (b[off + 1]);
  if (first < 128) return { start: off + 2, end: off + 2 + first };
  const k = first & 0x7f;
  let len = 0;
  for (let i = 0; i < k; i++) len = len * 256 + /** @type {number} */ (b[off + 2 + i]);
  return { start: off + 2 + k, end: off + 2 + k + len };
}

const NONCE_OID = Buffer.from('06092b0601050507300102', 'hex');

/** The request with a requestExtensions nonce of 16 fresh bytes (RFC 8954). */
function withNonce(/** @type {Buffer} */ request) {
  const outer = tlv(request, 0);
  const tbs = tlv(request, outer.start);
  const ext = enc(0xa2, enc(0x30, enc(0x30, Buffer.concat([NONCE_OID, enc(0x04, enc(0x04, randomBytes(16)))]))));
  return enc(0x30, enc(0x30, Buffer.concat([request.subarray(tbs.start, tbs.end), ext])));
}

/** 0 when the OCSPResponse says successful. */
export function ocspStatus(/** @type {Buffer} */ body) {
  if (body.length < 5 || body[0] !== 0x30) return -1;
  const first = /** @type {number} */ (body[1]);
  const off = first < 128 ? 2 : 2 + (first & 0x7f);
  return body[off] === 0x0a ? /** @type {number} */ (body[off + 2]) : -1;
}

/** @param {OcspLoadSpec} spec */
async function run(spec) {
  const bodies = spec.requests.map((r) => Buffer.from(r, 'base64'));
  const head = (/** @type {Buffer} */ body) => Buffer.from(`POST ${spec.path} HTTP/${spec.http}\r\nHost: 127.0.0.1\r\nContent-Type: application/ocsp-request\r\nContent-Length: ${body.length}\r\n${spec.mode === 'close' && spec.http === '1.1' ? 'Connection: close\r\n' : ''}\r\n`);
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let counting = false;
  let stopAt = 0;
  let requests = 0;
  let errors = 0;
  let seq = 0;

  /** One exchange on `socket` (connected or connecting); resolves with the response body, or null. */
  function exchange(/** @type {net.Socket} */ socket) {
    return new Promise((resolve) => {
      let data = Buffer.alloc(0);
      let need = -1;
      let bodyStart = -1;
      const done = (/** @type {Buffer | null} */ v) => {
        socket.off('data', onData);
        socket.off('close', onClose);
        resolve(v);
      };
      const onData = (/** @type {Buffer} */ chunk) => {
        data = Buffer.concat([data, chunk]);
        if (bodyStart < 0) {
          const end = data.indexOf('\r\n\r\n');
          if (end < 0) return;
          bodyStart = end + 4;
          const headers = data.subarray(0, end).toString('latin1');
          const m = /content-length:\s*(\d+)/i.exec(headers);
          need = m ? Number(m[1]) : -1;
          if (!spec.anyAnswer && !/^HTTP\/1\.[01] 200/.test(headers)) return done(null);
          if (spec.anyAnswer && need <= 0) return done(Buffer.alloc(0));
        }
        if (need >= 0 && data.length - bodyStart >= need) done(data.subarray(bodyStart, bodyStart + need));
      };
      const onClose = () => done(bodyStart >= 0 ? data.subarray(bodyStart) : null);
      socket.on('data', onData);
      socket.on('close', onClose);
    });
  }

  async function loop() {
    /** @type {net.Socket | null} */
    let kept = null;
    while (performance.now() < stopAt) {
      const base = /** @type {Buffer} */ (bodies[seq++ % bodies.length]);
      const body = spec.nonce ? withNonce(base) : base;
      const t0 = process.hrtime.bigint();
      let socket = kept;
      if (!socket) {
        socket = net.connect(spec.port, '127.0.0.1');
        socket.setNoDelay(true);
        socket.on('error', () => undefined);
        if (spec.mode === 'keepalive') kept = socket;
      }
      const answer = exchange(socket);
      socket.write(Buffer.concat([head(body), body]));
      const res = /** @type {Buffer | null} */ (await answer);
      if (spec.mode === 'close') socket.destroy();
      else if (!res || socket.destroyed) kept = null;
      if (!counting) continue;
      if (res && (spec.anyAnswer || ocspStatus(res) === 0)) {
        requests++;
        hist.recordValue(Math.max(1, Number(process.hrtime.bigint() - t0) / 1000));
      } else errors++;
    }
    kept?.destroy();
  }

  stopAt = performance.now() + spec.warmupSeconds * 1000;
  await Promise.all(Array.from({ length: spec.connections }, loop));
  counting = true;
  /** @type {any} */ (process).send({ type: 'window-start' });
  const started = performance.now();
  stopAt = started + spec.durationSeconds * 1000;
  await Promise.all(Array.from({ length: spec.connections }, loop));
  const wallSeconds = (performance.now() - started) / 1000;
  /** @type {any} */ (process).send({ type: 'window-end' });
  /** @type {any} */ (process).send({ type: 'result', result: {
    requests, errors, wallSeconds, reqPerSec: requests / wallSeconds,
    p50Us: hist.getValueAtPercentile(50), p99Us: hist.getValueAtPercentile(99), maxUs: hist.maxValue,
  } });
  process.exit(0);
}

if (process.argv[1] === selfPath) process.once('message', (/** @type {any} */ spec) => void run(spec));
