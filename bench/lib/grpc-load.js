// Owns the gRPC load generator: a child process with one channel (one grpc-js client, one HTTP/2
// connection) and N calls in flight on it (each loop: call, await the reply, repeat), the client loaded
// from the service's proto. Its own process, so its CPU is measured apart from the server's.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const selfPath = fileURLToPath(import.meta.url);

/**
 * @typedef {object} GrpcLoadSpec
 * @property {string} target host:port
 * @property {string} service e.g. AuthService
 * @property {string} method e.g. AuthenticateCredential
 * @property {Record<string, unknown>[]} requests sent in turn (loop i starts at request i)
 * @property {string} token sent as `authorization: Bearer <token>` on every call
 * @property {number} concurrency calls in flight on the channel
 */

/**
 * @param {GrpcLoadSpec & {warmupSeconds: number, durationSeconds: number, onWindowStart: (pid: number) => void, onWindowEnd: (pid: number) => void}} opts
 * @returns {{pid: number, done: Promise<any>}}
 */
export function startGrpcLoad({ onWindowStart, onWindowEnd, ...spec }) {
  const child = fork(selfPath, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pid = /** @type {number} */ (child.pid);
  const done = new Promise((resolve, reject) => {
    let result = null;
    child.on('message', (/** @type {any} */ msg) => {
      if (msg.type === 'window-start') onWindowStart(pid);
      else if (msg.type === 'window-end') onWindowEnd(pid);
      else if (msg.type === 'result') resolve((result = msg.result));
      else if (msg.type === 'error') reject(new Error(`grpc load generator: ${msg.message}`));
    });
    child.once('exit', (code) => {
      if (!result) reject(new Error(`grpc load generator exited with code ${code} before reporting`));
    });
  });
  child.send({ type: 'run', spec });
  return { pid, done };
}

/** @param {GrpcLoadSpec & {warmupSeconds: number, durationSeconds: number}} spec */
async function runGenerator(spec) {
  const [{ serviceGrpc, serviceGrpcModule }, { default: hdr }] = await Promise.all([import('./grpc-bare-server.js'), import('hdr-histogram-js')]);
  const grpc = serviceGrpc();
  const { loadServices, serviceOf } = await serviceGrpcModule();
  const Client = serviceOf(loadServices(), spec.service);
  const client = new Client(spec.target, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${spec.token}`);
  const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  const state = { stopping: false, errors: 0, ok: 0, /** @type {Record<string, number>} */ codes: {} };
  const call = (/** @type {unknown} */ request) => new Promise((resolve) => {
    client[spec.method](request, metadata, (/** @type {any} */ err) => resolve(err));
  });
  const loop = async (/** @type {number} */ i) => {
    let n = i;
    while (!state.stopping) {
      const start = process.hrtime.bigint();
      const err = /** @type {any} */ (await call(spec.requests[n++ % spec.requests.length]));
      const us = Number((process.hrtime.bigint() - start) / 1000n);
      histogram.recordValue(us < 1 ? 1 : us);
      if (err) {
        state.errors++;
        state.codes[err.code] = (state.codes[err.code] ?? 0) + 1;
      } else state.ok++;
    }
  };
  const loops = Array.from({ length: spec.concurrency }, (_, i) => loop(i));
  await sleep(spec.warmupSeconds * 1000);
  histogram.reset();
  Object.assign(state, { errors: 0, ok: 0, codes: {} });
  const windowStart = process.hrtime.bigint();
  /** @type {any} */ (process).send({ type: 'window-start' });
  await sleep(spec.durationSeconds * 1000);
  state.stopping = true;
  await Promise.all(loops); // each loop's last call is awaited, never cut
  const wallSeconds = Number(process.hrtime.bigint() - windowStart) / 1e9;
  /** @type {any} */ (process).send({ type: 'window-end' });
  client.close();
  const requests = histogram.totalCount;
  return {
    requests, wallSeconds, reqPerSec: requests / wallSeconds,
    p50Us: requests ? histogram.getValueAtPercentile(50) : null,
    p99Us: requests ? histogram.getValueAtPercentile(99) : null,
    maxUs: requests ? histogram.maxValue : null,
    errors: state.errors, errorCodes: state.codes,
  };
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

if (process.argv[1] === selfPath) {
  process.on('disconnect', () => process.exit(1)); // the bench died: stop loading the server
  process.once('message', (/** @type {any} */ msg) => {
    runGenerator(msg.spec).then(
      (result) => /** @type {any} */ (process).send({ type: 'result', result }, () => process.exit(0)),
      (err) => /** @type {any} */ (process).send({ type: 'error', message: err.stack ?? String(err) }, () => process.exit(1)),
    );
  });
}
