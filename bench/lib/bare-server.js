// Owns the baseline: a bare uWebSockets.js handler in its own process answering 202 with an empty body
// (or, given replyBytes, reading the request body and answering 200 with that many bytes).
import { fileURLToPath } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * Start the bare server as a child process; its port is reported as listener "http", like the service's.
 * `replyBytes`: read each request's body, then answer 200 with a body of this size (a responder's floor).
 * @param {{replyBytes?: number}} [opts]
 * @returns {Promise<import('./spawn-server.js').SpawnedServer>}
 */
export function startBareServer({ replyBytes } = {}) {
  const env = replyBytes ? { BARE_REPLY_BYTES: String(replyBytes) } : {};
  return spawnServer({ args: [selfPath], env, cwd: repoRoot, name: 'bare-server', startTimeoutMs: 10_000, ipc: true });
}

/** Reads the whole body (as any POST handler must), then answers `reply` in one corked write. */
function replyAfterBody(/** @type {any} */ res, /** @type {Buffer} */ reply) {
  let aborted = false;
  res.onAborted(() => { aborted = true; });
  res.onData((/** @type {ArrayBuffer} */ _chunk, /** @type {boolean} */ last) => {
    if (!last || aborted) return;
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

if (process.argv[1] === selfPath) await serveBare();
