// Owns the HTTP load generator: a child process of N keep-alive connections, one request in flight each.
import { fork } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const selfPath = fileURLToPath(import.meta.url);

/**
 * @typedef {object} RequestSpec what one connection sends, again and again
 * @property {string} [listener] service listener to target (default "http")
 * @property {string} [method] default GET
 * @property {string} path
 * @property {Record<string,string>} [headers]
 * @property {string | Buffer | ((seq: number, connection: number) => string | Buffer)} [body] a function varies payloads per request
 * @property {number} [expectedStatus] a response with another status is an error (default: any 2xx)
 */

/**
 * @typedef {object} LoadResult
 * @property {number} requests responses completed inside the measured window
 * @property {number} wallSeconds measured window, from its start until the last in-flight response
 * @property {number} reqPerSec
 * @property {number|null} p50Us
 * @property {number|null} p99Us
 * @property {number|null} maxUs
 * @property {number|null} meanUs
 * @property {number} errors unexpected statuses plus transport errors, in the window
 * @property {Record<string, number>} statusCounts every status seen in the window
 * @property {Record<string, number>} non2xx
 * @property {Record<string, number>} transportErrors by error code
 * @property {number} acknowledged responses with the expected status since the first request, warm-up included (ingest counts stored rows against it)
 */

/**
 * Run the generator in its own process (its CPU is measured apart from the server's). The scenario
 * module is imported again in the child, which calls scenario.request(ctx): ctx must be plain data.
 * @param {{scenarioFile: string, ctx: object, connections: number, warmupSeconds: number, durationSeconds: number,
 *   onWindowStart: (pid: number) => void, onWindowEnd: (pid: number) => void}} opts called when warm-up ends and
 *   when the last response of the window arrived: the caller snapshots CPU there
 * @returns {{pid: number, done: Promise<LoadResult>}}
 */
export function startLoad({ scenarioFile, ctx, connections, warmupSeconds, durationSeconds, onWindowStart, onWindowEnd }) {
  const child = fork(selfPath, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pid = /** @type {number} */ (child.pid);
  const done = new Promise((resolve, reject) => {
    let result = /** @type {LoadResult | null} */ (null);
    child.on('message', (/** @type {any} */ msg) => {
      if (msg.type === 'window-start') onWindowStart(pid);
      else if (msg.type === 'window-end') onWindowEnd(pid);
      else if (msg.type === 'result') resolve((result = msg.result));
      else if (msg.type === 'error') reject(new Error(`load generator: ${msg.message}`));
    });
    child.once('exit', (code) => {
      if (!result) reject(new Error(`load generator exited with code ${code} before reporting`));
    });
  });
  child.send({ type: 'run', scenarioFile, ctx, connections, warmupSeconds, durationSeconds });
  return { pid, done };
}

/** @param {any} opts */
async function runGenerator({ scenarioFile, ctx, connections, warmupSeconds, durationSeconds }) {
  const [{ Client }, { default: hdr }, scenario] = await Promise.all([
    import('undici'),
    import('hdr-histogram-js'),
    import(pathToFileURL(scenarioFile).href),
  ]);
  /** @type {RequestSpec} */
  const spec = scenario.default.request(ctx);
  const port = ctx.ports?.[spec.listener ?? 'http'];
  if (!port) throw new Error(`no port for listener ${spec.listener ?? 'http'}: ${JSON.stringify(ctx.ports)}`);
  // Values are whole µs up to 60 s, 3 significant digits: p50 and p99 keep µs resolution.
  const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  const state = { stopping: false, seq: 0, acknowledged: 0, errors: 0, statusCounts: {}, transportErrors: {} };
  const origin = `http://127.0.0.1:${port}`;
  const clients = Array.from({ length: connections }, () => new Client(origin, { pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 }));
  const loops = clients.map((client, i) => loopConnection(client, i, spec, state, histogram));

  await sleep(warmupSeconds * 1000);
  // Only what completes from here on is counted; requests in flight now complete inside the window.
  histogram.reset();
  Object.assign(state, { errors: 0, statusCounts: {}, transportErrors: {} });
  const windowStart = process.hrtime.bigint();
  /** @type {any} */ (process).send({ type: 'window-start' });
  await sleep(durationSeconds * 1000);
  state.stopping = true;
  await Promise.all(loops); // each connection's last request is awaited, never cut
  const wallSeconds = Number(process.hrtime.bigint() - windowStart) / 1e9;
  /** @type {any} */ (process).send({ type: 'window-end' });
  await Promise.all(clients.map((c) => c.close()));

  const answered = histogram.totalCount > 0;
  const requests = histogram.totalCount + Object.values(state.transportErrors).reduce((a, b) => a + b, 0);
  /** @type {Record<string, number>} */
  const non2xx = Object.fromEntries(Object.entries(state.statusCounts).filter(([s]) => !s.startsWith('2')));
  return {
    requests,
    wallSeconds,
    reqPerSec: requests / wallSeconds,
    // No response at all (every request failed) has no latency, not a latency of 0.
    p50Us: answered ? histogram.getValueAtPercentile(50) : null,
    p99Us: answered ? histogram.getValueAtPercentile(99) : null,
    maxUs: answered ? histogram.maxValue : null,
    meanUs: answered ? histogram.mean : null,
    errors: state.errors,
    statusCounts: state.statusCounts,
    non2xx,
    transportErrors: state.transportErrors,
    acknowledged: state.acknowledged,
  };
}

/**
 * One connection: send, await the full response, record, repeat until told to stop.
 * @param {import('undici').Client} client
 * @param {number} connection
 * @param {RequestSpec} spec
 * @param {any} state
 * @param {any} histogram
 */
async function loopConnection(client, connection, spec, state, histogram) {
  const { method = 'GET', path, headers, expectedStatus } = spec;
  while (!state.stopping) {
    const body = typeof spec.body === 'function' ? spec.body(state.seq++, connection) : spec.body;
    const start = process.hrtime.bigint();
    try {
      const res = await client.request({ method: /** @type {any} */ (method), path, headers, body });
      await res.body.arrayBuffer(); // latency includes reading the whole body
      const us = Number((process.hrtime.bigint() - start) / 1000n);
      histogram.recordValue(us < 1 ? 1 : us);
      const status = res.statusCode;
      state.statusCounts[status] = (state.statusCounts[status] ?? 0) + 1;
      const ok = expectedStatus === undefined ? status >= 200 && status < 300 : status === expectedStatus;
      if (ok) state.acknowledged++;
      else state.errors++;
    } catch (err) {
      const code = /** @type {any} */ (err).code ?? /** @type {Error} */ (err).name;
      state.transportErrors[code] = (state.transportErrors[code] ?? 0) + 1;
      state.errors++;
      await sleep(10); // a refused connection fails instantly: do not spin the generator's core on it
    }
  }
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

if (process.argv[1] === selfPath) {
  process.on('disconnect', () => process.exit(1)); // the bench died: stop loading the server
  process.once('message', (/** @type {any} */ msg) => {
    runGenerator(msg).then(
      (result) => /** @type {any} */ (process).send({ type: 'result', result }, () => process.exit(0)),
      (err) => /** @type {any} */ (process).send({ type: 'error', message: err.stack ?? String(err) }, () => process.exit(1)),
    );
  });
}
