// Owns the per-tenant-count figures of the pki-fleet scenario, each measured on one service of the pair
// (10 tenants, 10,000 tenants) in alternating rounds: CPU per answer is the service's process tree plus
// the backends of its own database (other databases on the shared PostgreSQL are not counted).
import { request as httpsRequest } from 'node:https';
import { Agent, request as httpRequest } from 'node:http';
import { diffCpuSnapshots, startCpuWindow, takeCpuSnapshot } from './cpu.js';
import { cpuOf } from './fleet-world.js';
import { startGrpcLoad } from './grpc-load.js';
import { runOcspLoad } from './ocsp-load.js';

/**
 * @typedef {{requests: number, wallSeconds: number, serviceCpuSeconds: number, postgresCpuSeconds: number, errors: number,
 *   p50Us: number | null, statuses?: Record<string, number>}} Window
 */

/** One request; resolves with status and body bytes. */
function send(/** @type {any} */ options, /** @type {Buffer | string | null} */ body, https = true) {
  return new Promise((resolve, reject) => {
    const req = (https ? httpsRequest : httpRequest)(options, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

/**
 * `connections` closed loops in this process sending `count` measured requests after `warmup` ones; CPU of
 * the service over the measured ones only.
 * @param {any} service @param {{connections: number, warmup: number, count: number}} load
 * @param {(i: number) => Promise<{status: number}>} next @param {number} expected
 * @returns {Promise<Window>}
 */
async function drive(service, { connections, warmup, count }, next, expected) {
  const { roots, opts } = cpuOf(service);
  let sent = 0;
  /** @type {Record<string, number>} */
  const statuses = {};
  const latencies = [];
  let errors = 0;
  const loop = async (/** @type {number} */ limit, /** @type {boolean} */ measured) => {
    while (sent < limit) {
      const i = sent++;
      const t0 = process.hrtime.bigint();
      try {
        const { status } = await next(i);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status !== expected) errors++;
      } catch (err) {
        errors++;
        statuses[/** @type {Error} */ (err).message] = (statuses[/** @type {Error} */ (err).message] ?? 0) + 1;
      }
      if (measured) latencies.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
  };
  await Promise.all(Array.from({ length: connections }, () => loop(warmup, false)));
  for (const k of Object.keys(statuses)) delete statuses[k];
  errors = 0;
  const window = startCpuWindow(roots, opts);
  await Promise.all(Array.from({ length: connections }, () => loop(warmup + count, true)));
  const cpu = window.stop();
  latencies.sort((a, b) => a - b);
  return {
    requests: count, wallSeconds: cpu.wallSeconds, serviceCpuSeconds: cpu.cpuSeconds.service, postgresCpuSeconds: cpu.cpuSeconds.postgres,
    errors, p50Us: Math.round(latencies[Math.floor(latencies.length / 2)] ?? 0), statuses, otherCpuSeconds: cpu.otherCpuSeconds,
  };
}

/**
 * EST simplereenroll under the probe tenant's label over mTLS, a new TLS connection per request (the
 * handshake, the client-certificate verification and a real renewal), each presenting a certificate not
 * presented before.
 * @param {any} service @param {any} probe @param {import('node:tls').SecureContext[]} contexts @param {{connections: number, warmup: number, count: number}} load
 */
export function estReenroll(service, probe, contexts, load) {
  if (contexts.length < load.warmup + load.count) throw new Error(`est: ${contexts.length} client certificates for ${load.warmup + load.count} requests`);
  const body = Buffer.from(probe.csrDerBase64);
  return drive(service, load, (i) => send({
    host: '127.0.0.1', port: service.ports.enrollment, method: 'POST', path: `/.well-known/est/${probe.alias}/simplereenroll`, agent: false,
    secureContext: contexts[i], rejectUnauthorized: false, headers: { 'content-type': 'application/pkcs10', 'content-length': body.length },
  }, body), 200);
}

/**
 * GET of a CRL on the management listener, keep-alive connections (what a relying party polling it costs).
 * @param {any} service @param {string} issuerId @param {{connections: number, warmup: number, count: number}} load
 */
export function crlAnswers(service, issuerId, load) {
  const agent = new Agent({ keepAlive: true, maxSockets: load.connections });
  return drive(service, load, () => send({ host: '127.0.0.1', port: service.ports.http, method: 'GET', path: `/certs/issuers/${issuerId}/crl`, agent }, null, false), 200)
    .finally(() => agent.destroy());
}

/**
 * OCSP answers (lib/ocsp-load.js: raw TCP, 16 loops, a new connection per request unless keep-alive).
 * @param {any} service @param {string} issuerId @param {string[]} requests @param {any} ctx @param {{mode: 'close' | 'keepalive', nonce: boolean}} o
 * @returns {Promise<Window>}
 */
export async function ocspAnswers(service, issuerId, requests, ctx, { mode, nonce }) {
  const { roots, opts } = cpuOf(service);
  /** @type {any} */
  let before;
  /** @type {any} */
  let after;
  const result = await runOcspLoad({
    port: service.ports.http, path: `/certs/issuers/${issuerId}/ocsp`, requests, mode, nonce, http: '1.1', connections: 16,
    warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (gen) => { before = takeCpuSnapshot({ ...roots, generator: gen }, opts); },
    onWindowEnd: (gen) => { after = takeCpuSnapshot({ ...roots, generator: gen }, opts); },
  });
  const cpu = diffCpuSnapshots(before, after);
  return {
    requests: result.requests, wallSeconds: cpu.wallSeconds, serviceCpuSeconds: cpu.cpuSeconds.service, postgresCpuSeconds: cpu.cpuSeconds.postgres,
    errors: result.errors, p50Us: result.p50Us, otherCpuSeconds: cpu.otherCpuSeconds,
  };
}

/**
 * gRPC ResolveCertificateV2 by leaf DER, one channel, 64 calls in flight (lib/grpc-load.js), the probe's
 * 16 leaves in turn, with the protocol adapter's bearer.
 * @param {any} service @param {any} probe @param {any} ctx
 * @returns {Promise<Window>}
 */
export async function grpcResolve(service, probe, ctx) {
  const { roots, opts } = cpuOf(service);
  /** @type {any} */
  let before;
  /** @type {any} */
  let after;
  const { done } = startGrpcLoad({
    target: `127.0.0.1:${service.ports.grpc}`, service: 'CertificateService', method: 'ResolveCertificateV2', requests: probe.resolveRequests,
    token: probe.world.token, concurrency: 64, warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (gen) => { before = takeCpuSnapshot({ ...roots, generator: gen }, opts); },
    onWindowEnd: (gen) => { after = takeCpuSnapshot({ ...roots, generator: gen }, opts); },
  });
  const result = await done;
  const cpu = diffCpuSnapshots(before, after);
  return {
    requests: result.requests, wallSeconds: cpu.wallSeconds, serviceCpuSeconds: cpu.cpuSeconds.service, postgresCpuSeconds: cpu.cpuSeconds.postgres,
    errors: result.errors, p50Us: result.p50Us, statuses: result.errorCodes, otherCpuSeconds: cpu.otherCpuSeconds,
  };
}

/**
 * Bytes of what a relying party or device downloads: EST cacerts under the probe's label and unlabelled,
 * EST csrattrs under the label, and the trust bundle (management listener).
 * @param {any} service @param {any} probe
 */
export async function sizes(service, probe) {
  const est = async (/** @type {string} */ p) => {
    const r = /** @type {any} */ (await send({ host: '127.0.0.1', port: service.ports.enrollment, method: 'GET', path: p, agent: false, rejectUnauthorized: false }, null));
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status}`);
    return r.body.length;
  };
  const bundle = /** @type {any} */ (await send({ host: '127.0.0.1', port: service.ports.http, method: 'GET', path: '/certs/trust-bundle.pem' }, null, false));
  return {
    cacertsLabelled: await est(`/.well-known/est/${probe.alias}/cacerts`),
    cacertsUnlabelled: await est('/.well-known/est/cacerts'),
    csrattrsLabelled: await est(`/.well-known/est/${probe.alias}/csrattrs`),
    trustBundle: bundle.body.length,
  };
}

/** Windows of the same figure summed (rounds pooled): CPU per answer from the sums. */
export function pooled(/** @type {Window[]} */ ws) {
  const sum = (/** @type {(w: Window) => number} */ f) => ws.reduce((a, w) => a + f(w), 0);
  const requests = sum((w) => w.requests);
  const cpu = sum((w) => w.serviceCpuSeconds + w.postgresCpuSeconds);
  const p50s = ws.map((w) => w.p50Us ?? 0).sort((a, b) => a - b);
  return {
    requests, perSecond: requests / sum((w) => w.wallSeconds), cpuUsPerAnswer: (cpu / Math.max(1, requests)) * 1e6,
    processCpuUsPerAnswer: (sum((w) => w.serviceCpuSeconds) / Math.max(1, requests)) * 1e6,
    p50Us: p50s[Math.floor(p50s.length / 2)], errors: sum((w) => w.errors), rounds: ws.map((w) => ((w.serviceCpuSeconds + w.postgresCpuSeconds) / Math.max(1, w.requests)) * 1e6),
  };
}
