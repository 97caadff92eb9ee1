// Owns the baseline: a bare uWebSockets.js handler in its own process answering 202 with an empty body.
import { fileURLToPath } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * Start the bare server as a child process; its port is reported as listener "http", like the service's.
 * @returns {Promise<import('./spawn-server.js').SpawnedServer>}
 */
export function startBareServer() {
  return spawnServer({ args: [selfPath], cwd: repoRoot, name: 'bare-server', startTimeoutMs: 10_000, ipc: true });
}

async function serveBare() {
  const uws = nativeUws('a baseline');
  const app = uws.App().any('/*', (/** @type {any} */ res) => {
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
