// Owns starting a server process and learning its ports from its JSON "listening"/"ready" stdout lines.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const TAIL_LINES = 40;

/**
 * @typedef {object} SpawnedServer
 * @property {number} pid
 * @property {Record<string, number>} ports listener name -> bound port
 * @property {() => number} countLogLines stdout lines seen since ready (a service logging per request skews its CPU)
 * @property {() => string} readTail last lines of stdout and stderr, for error messages
 * @property {(timeoutMs?: number) => Promise<{code: number|null, signal: string|null}>} stop SIGTERM, then SIGKILL after timeoutMs
 */

/**
 * Spawn `node <args>` and resolve once it printed {"msg":"ready"}; reject if it exits or times out first.
 * ipc: give the child an IPC channel so a server of our own can exit when the bench dies (disconnect).
 * onLine: every line of stdout and stderr (stderr prefixed "[stderr] "), e.g. to keep a whole log.
 * @param {{args: string[], env?: Record<string,string>, cwd?: string, name?: string, startTimeoutMs?: number, ipc?: boolean, onLine?: (line: string) => void}} opts
 * @returns {Promise<SpawnedServer>}
 */
export function spawnServer({ args, env = {}, cwd = process.cwd(), name = 'server', startTimeoutMs = 60_000, ipc = false, onLine }) {
  const stdio = /** @type {import('node:child_process').StdioOptions} */ (['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc'] : [])]);
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env }, stdio });
  if (ipc) child.channel?.unref(); // the channel alone must not keep the bench alive
  /** @type {Record<string, number>} */
  const ports = {};
  /** @type {string[]} */
  const tail = [];
  let ready = false;
  let logLinesAfterReady = 0;
  const pushTail = (/** @type {string} */ line) => {
    onLine?.(line);
    tail.push(line);
    if (tail.length > TAIL_LINES) tail.shift();
  };
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stderr) }).on('line', (line) => pushTail(`[stderr] ${line}`));

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} not ready after ${startTimeoutMs} ms\n${tail.join('\n')}`));
    }, startTimeoutMs);
    exited.then(({ code, signal }) => {
      if (ready) return;
      clearTimeout(timer);
      reject(new Error(`${name} exited before ready (code ${code}, signal ${signal})\n${tail.join('\n')}`));
    });
    createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) }).on('line', (line) => {
      pushTail(line);
      if (ready) {
        logLinesAfterReady++;
        return;
      }
      const entry = parseJsonLine(line);
      if (entry?.msg === 'listening' && typeof entry.listener === 'string') ports[entry.listener] = Number(entry.port);
      if (entry?.msg !== 'ready') return;
      ready = true;
      clearTimeout(timer);
      resolve({
        pid: /** @type {number} */ (child.pid),
        ports,
        countLogLines: () => logLinesAfterReady,
        readTail: () => tail.join('\n'),
        stop: (timeoutMs = 15_000) => stopChild(child, exited, timeoutMs),
      });
    });
  });
}

/** @param {string} line */
function parseJsonLine(line) {
  if (!line.startsWith('{')) return null;
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/**
 * @param {import('node:child_process').ChildProcess} child
 * @param {Promise<{code: number|null, signal: string|null}>} exited
 * @param {number} timeoutMs
 */
async function stopChild(child, exited, timeoutMs) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const result = await exited;
  clearTimeout(timer);
  return result;
}
