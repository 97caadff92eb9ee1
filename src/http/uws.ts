// Loads uWebSockets.js and refuses to run on its silent pure-JS fallback.
import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';

const require = createRequire(import.meta.url);

function loadNative(): typeof Uws {
  const previous = console.warn;
  const warnings: unknown[][] = [];
  // The loader prints a warning and falls back instead of throwing; capture it to report it ourselves.
  console.warn = (...args: unknown[]) => warnings.push(args);
  let mod: typeof Uws;
  try {
    mod = require('uWebSockets.js') as typeof Uws;
  } finally {
    console.warn = previous;
  }
  // The fallback exports only App/us_listen_socket_close; the native addon has SSLApp and getParts.
  const native = typeof (mod as { SSLApp?: unknown }).SSLApp === 'function'
    && typeof (mod as { getParts?: unknown }).getParts === 'function';
  if (!native) {
    const detail = warnings.map((w) => w.map(String).join(' ')).join(' ').trim();
    throw new Error(
      `uWebSockets.js native binary did not load (platform ${process.platform}-${process.arch}, ABI ${process.versions.modules}); `
      + `refusing to run on the slow JavaScript fallback${detail ? `: ${detail}` : ''}`,
    );
  }
  return mod;
}

let loaded: typeof Uws | undefined;

/** The native module, loaded on first use so that importing this file has no side effects. */
export function nativeUws(): typeof Uws {
  return (loaded ??= loadNative());
}
export type { HttpRequest as UwsRequest, HttpResponse as UwsResponse, TemplatedApp, WebSocket as UwsWebSocket, us_listen_socket } from 'uWebSockets.js';
