// Owns the baseline: a bare uWebSockets.js handler in its own process answering 202 with an empty body
// (or, given replyBytes, reading the request body and answering 200 with that many bytes). With nodeHttp,
// the same responder on node:http instead: the floor of a listener that must speak HTTP/1.0, which
// uWebSockets.js does not; with rawNet, on node:net without any HTTP parser (the floor under node:http).
import crypto from 'node:crypto';
import http from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * Start the bare server as a child process; its port is reported as listener "http", like the service's.
 * `replyBytes`: read each request's body, then answer 200 with a body of this size (a responder's floor).
 * `nodeHttp`: serve with node:http (HTTP/1.0 and 1.1) rather than uWebSockets.js; needs replyBytes.
 * `rawNet`: serve with node:net and no HTTP parser (serveBareNet); needs replyBytes.
 * `sign`: also sign 300 bytes with a P-256 key per request, with the service's signer (the native one
 * when built), as every nonce answer must.
 * @param {{replyBytes?: number, nodeHttp?: boolean, sign?: boolean, rawNet?: boolean}} [opts]
 * @returns {Promise<import('./spawn-server.js').SpawnedServer>}
 */
export function startBareServer({ replyBytes, nodeHttp = false, sign = false, rawNet = false } = {}) {
  const env = {
    ...(rawNet ? { BARE_NET: '1' } : {}),
    ...(replyBytes ? { BARE_REPLY_BYTES: String(replyBytes) } : {}),
    ...(nodeHttp ? { BARE_NODE_HTTP: '1' } : {}),
    ...(sign ? { BARE_SIGN: '1' } : {}),
  };
  return spawnServer({ args: [selfPath], env, cwd: repoRoot, name: 'bare-server', startTimeoutMs: 10_000, ipc: true });
}

const toBeSigned = Buffer.alloc(300, 0x31);
/** With BARE_SIGN, the service's own ECDSA signer (dist/workers/ecdsa-signer.js) over a fresh P-256 key. */
const signOnce = process.env.BARE_SIGN ? await p256Signer() : null;

async function p256Signer() {
  const { ecdsaSigner } = await import(pathToFileURL(join(repoRoot, 'dist', 'workers', 'ecdsa-signer.js')).href);
  const key = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const pkcs8 = key.export({ type: 'pkcs8', format: 'der' });
  return /** @type {(data: Uint8Array) => Buffer} */ (ecdsaSigner(key, pkcs8, 'sha256'));
}

/** Reads the whole body (as any POST handler must), then answers `reply` in one corked write. */
function replyAfterBody(/** @type {any} */ res, /** @type {Buffer} */ reply) {
  let aborted = false;
  res.onAborted(() => { aborted = true; });
  res.onData((/** @type {ArrayBuffer} */ _chunk, /** @type {boolean} */ last) => {
    if (!last || aborted) return;
    if (signOnce) signOnce(toBeSigned);
    res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/octet-stream').end(reply));
  });
}

async function serveBare() {
  const uws = nativeUws('a baseline');
  const replyBytes = Number(process.env.BARE_REPLY_BYTES ?? 0);
  const reply = Buffer.alloc(replyBytes, 0x30);
  const app = uws.App().any('/*', (/** @type {any} */ res) => {
    if (replyBytes > 0) return replyAfterBody(res, reply);
    // Answered synchronously: no body is read, which is the cheapest a uWS handler can be.
    res.writeStatus('202 Accepted').end();
  });
  const listenSocket = await listenAndAnnounce(uws, app, 'http', 'bare server');
  // The bench died without stopping us: do not keep a port and a process behind.
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => {
    uws.us_listen_socket_close(listenSocket);
    process.exit(0);
  });
}

/**
 * Binds a node:http or node:net server on 127.0.0.1 port 0 and announces it as the service does (its
 * `listening` and `ready` lines); exits when the bench goes away or stops it.
 * @param {import('node:net').Server} server
 */
async function listenAndAnnounceNode(server) {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  console.log(JSON.stringify({ level: 'info', msg: 'listening', listener: 'http', host: '127.0.0.1', port }));
  console.log(JSON.stringify({ level: 'info', msg: 'ready' }));
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

/** node:http reading the whole body (and with BARE_SIGN signing once), then answering 200 with `BARE_REPLY_BYTES` bytes. */
async function serveBareNodeHttp() {
  const reply = Buffer.alloc(Number(process.env.BARE_REPLY_BYTES ?? 0), 0x30);
  const server = http.createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => {
      if (signOnce) signOnce(toBeSigned);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': reply.length });
      res.end(reply);
    });
  });
  await listenAndAnnounceNode(server);
}

/**
 * node:net with no HTTP parser at all: the request read up to its Content-Length (headers found by a scan),
 * the same bytes answered, the connection ended. What a listener speaking HTTP/1.0 costs at the least on
 * Node's sockets: the floor under node:http.
 */
async function serveBareNet() {
  const net = await import('node:net');
  const reply = Buffer.alloc(Number(process.env.BARE_REPLY_BYTES ?? 0), 0x30);
  const head = Buffer.from(`HTTP/1.0 200 OK\r\ncontent-type: application/ocsp-response\r\ncontent-length: ${reply.length}\r\nconnection: close\r\n\r\n`);
  const out = Buffer.concat([head, reply]);
  const server = net.createServer((socket) => {
    /** @type {Buffer | null} */
    let buf = null;
    socket.on('data', (/** @type {Buffer} */ chunk) => {
      buf = buf ? Buffer.concat([buf, chunk]) : chunk;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const m = /content-length:\s*(\d+)/i.exec(buf.toString('latin1', 0, end));
      if (buf.length < end + 4 + (m ? Number(m[1]) : 0)) return;
      socket.end(out);
    });
    socket.on('error', () => undefined);
  });
  await listenAndAnnounceNode(server);
}

if (process.argv[1] === selfPath) await (process.env.BARE_NET ? serveBareNet() : process.env.BARE_NODE_HTTP ? serveBareNodeHttp() : serveBare());
