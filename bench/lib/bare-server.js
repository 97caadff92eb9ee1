// Owns the baseline: a bare uWebSockets.js handler in its own process answering 202 with an empty body.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { spawnServer } from './spawn-server.js';
import { repoRoot } from './paths.js';

const selfPath = fileURLToPath(import.meta.url);

/**
 * Start the bare server as a child process; its port is reported as listener "http", like the service's.
 * @returns {Promise<import('./spawn-server.js').SpawnedServer>}
 */
export function startBareServer() {
  return spawnServer({ args: [selfPath], cwd: repoRoot, name: 'bare-server', startTimeoutMs: 10_000, ipc: true });
}

function serveBare() {
  // uWebSockets.js lives in the root node_modules (the service's dependency), not in bench's.
  const uws = createRequire(`${repoRoot}/package.json`)('uWebSockets.js');
  // The loader silently falls back to a slow JS implementation that lacks SSLApp: a baseline measured
  // on that would flatter every scenario, so refuse to run.
  if (typeof uws.SSLApp !== 'function') {
    console.error('uWebSockets.js native binary did not load (JS fallback): refusing to measure a baseline');
    process.exit(1);
  }
  /** @type {unknown} */
  let listenSocket = null;
  uws
    .App()
    .any('/*', (/** @type {any} */ res) => {
      // Answered synchronously: no body is read, which is the cheapest a uWS handler can be.
      res.writeStatus('202 Accepted').end();
    })
    .listen('127.0.0.1', 0, (/** @type {unknown} */ token) => {
      if (!token) {
        console.error('bare server could not listen');
        process.exit(1);
      }
      listenSocket = token;
      const port = uws.us_socket_local_port(token);
      console.log(JSON.stringify({ level: 'info', msg: 'listening', listener: 'http', host: '127.0.0.1', port }));
      console.log(JSON.stringify({ level: 'info', msg: 'ready' }));
    });
  // The bench died without stopping us: do not keep a port and a process behind.
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => {
    if (listenSocket) uws.us_listen_socket_close(listenSocket);
    process.exit(0);
  });
}

if (process.argv[1] === selfPath) serveBare();
