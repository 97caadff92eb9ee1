// Owns what the bench's own uWS servers (the bare baseline, the ingest floor) share: the service's
// uWebSockets.js, refused on its JS fallback, and the "listening"/"ready" lines spawn-server.js reads.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { repoRoot } from './paths.js';

/**
 * uWebSockets.js from the root node_modules (the service's dependency, not bench's). Its loader silently
 * falls back to a slow JS implementation that lacks SSLApp: a reference measured on that would flatter
 * every scenario, so the process refuses to run.
 * @param {string} what what this server measures, for the refusal
 */
export function nativeUws(what) {
  const uws = createRequire(join(repoRoot, 'package.json'))('uWebSockets.js');
  if (typeof uws.SSLApp !== 'function') {
    console.error(`uWebSockets.js native binary did not load (JS fallback): refusing to measure ${what}`);
    process.exit(1);
  }
  return uws;
}

/**
 * Listen on 127.0.0.1 at an ephemeral port and announce it as `listener`, then ready.
 * @param {any} uws @param {any} app @param {string} listener @param {string} what
 * @returns {Promise<unknown>} the listen socket
 */
export function listenAndAnnounce(uws, app, listener, what) {
  return new Promise((resolve) => {
    app.listen('127.0.0.1', 0, (/** @type {unknown} */ token) => {
      if (!token) {
        console.error(`${what} could not listen`);
        process.exit(1);
      }
      const port = uws.us_socket_local_port(token);
      console.log(JSON.stringify({ level: 'info', msg: 'listening', listener, host: '127.0.0.1', port }));
      console.log(JSON.stringify({ level: 'info', msg: 'ready' }));
      resolve(token);
    });
  });
}
