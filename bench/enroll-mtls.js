// Re-enrollment over mTLS against a bare node:https mTLS server answering 200, same run (issue 27).
// The service runs with the enrollment listener on; a device holds many certificates issued up front
// (a certificate renews once, so every request presents a different one). Load: `--connections` loops in
// this process, each request on a new TLS connection presenting its certificate, POST /pki/reenroll
// with a CSR. The bare server gets the same handshakes (same certificates, same TLS settings) and
// answers 200. Figures: requests/s and server CPU per request (the service with its workers plus every
// PostgreSQL process; the bare process alone), efficiency = bare CPU/request ÷ service CPU/request.
// A keep-alive pass follows: /pki/enroll with the device's bearer token over persistent TLS connections
// (a new certificate per request) against the bare server over persistent mTLS connections.
//   node bench/enroll-mtls.js [--duration 6] [--connections 8] [--rounds 2]
import { execFileSync } from 'node:child_process';
import { constants } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { startCpuWindow } from './lib/cpu.js';
import { pkiEnv } from './lib/pki-fixture.js';
import { benchDir, resultsDir } from './lib/paths.js';
import { startService, stopAllServices } from './lib/service.js';
import { spawnServer } from './lib/spawn-server.js';
import { adminSession, graphql } from './scenarios/auth-whoami-anon.js';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const DURATION = arg('duration', 6);
const CONNECTIONS = arg('connections', 8);
const ROUNDS = arg('rounds', 2);
const ssl = (args) => execFileSync('openssl', args, { stdio: 'pipe' }).toString();

const env = pkiEnv('encrypted_database');
const dir = path.dirname(env.SVC_PKI_ROOT_CERT_PATH);
const f = (n) => path.join(dir, n);
ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('listener.key'), '-out', f('listener.pem'),
  '-subj', '/CN=bench enrollment', '-days', '2', '-addext', 'subjectAltName=IP:127.0.0.1']);

/** One request; resolves with the status. */
function send({ port, agent, secureContext, path: p, body, headers = {} }) {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port, method: 'POST', path: p, agent, secureContext, servername: undefined, rejectUnauthorized: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `connections` loops for warmup + duration seconds; CPU measured over the duration only. */
async function drive(label, roots, next) {
  let count = 0;
  let errors = 0;
  let measuring = false;
  let stop = false;
  const statuses = {};
  const loops = Array.from({ length: CONNECTIONS }, async () => {
    while (!stop) {
      try {
        // Through a promise: a next() that throws at once must not turn this loop into a synchronous spin.
        const status = await Promise.resolve().then(next);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (measuring) count++;
        if (status >= 300) errors++;
      } catch (err) {
        errors++;
        if (err instanceof Error && err.message === 'out of certificates') throw err;
      }
    }
  });
  await new Promise((r) => setTimeout(r, 1000));
  measuring = true;
  const window = startCpuWindow(roots, { includePostgres: 'service' in roots });
  const own = process.cpuUsage();
  await new Promise((r) => setTimeout(r, DURATION * 1000));
  const cpu = window.stop();
  const ownUsage = process.cpuUsage(own);
  measuring = false;
  stop = true;
  await Promise.all(loops);
  const server = Object.values(cpu.cpuSeconds).reduce((a, v) => a + v, 0);
  const generator = (ownUsage.user + ownUsage.system) / 1e6;
  const result = {
    label, requests: count, reqPerSec: count / cpu.wallSeconds, cpuUsPerReq: (server / count) * 1e6,
    cpuUsPerReqByGroup: Object.fromEntries(Object.entries(cpu.cpuSeconds).map(([g, v]) => [g, Math.round((v / count) * 1e6)])), perServerCpuSecond: count / server,
    generatorCpuShare: generator / cpu.wallSeconds, otherCpuSeconds: cpu.otherCpuSeconds, statuses, errors,
  };
  console.log(JSON.stringify(result));
  return result;
}

async function main() {
  const service = await startService({
    env: {
      ...env, SVC_PKI_ENROLLMENT_ENABLED: 'true', SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0',
      SVC_PKI_ENROLLMENT_TLS_CERT_PATH: f('listener.pem'), SVC_PKI_ENROLLMENT_TLS_KEY_PATH: f('listener.key'),
      SVC_PKI_ENROLLMENT_MAX_CONNECTIONS_PER_IP: '1024', SVC_PKI_ENROLLMENT_MAX_CONNECTIONS: '4096', SVC_PKI_ENROLLMENT_HTTP_KEEP_ALIVE: 'true',
    },
  });
  const http = service.ports.http;
  const token = await adminSession(http);
  const tenant = (await graphql(http, 'mutation { createTenant(input: {name: "bench-enroll"}) { id } }', {}, token)).createTenant.id;
  const device = (await graphql(http, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "bench-device", tenantId: $t}) { id } }', { t: tenant }, token)).createEntity.id;
  const key = (await graphql(http, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device }, token)).createSharedKey.key;
  const deviceToken = (await graphql(http, 'mutation ($i: LoginInput!) { login(input: $i) { token } }', { i: { identifier: device, secret: key, kind: 'shared_key' } })).login.token;
  const csrPem = readFileSync(f('leaf.csr'), 'utf8');
  const keyPem = readFileSync(f('leaf.key'));
  const ISSUE = 'mutation ($i: IssueCertificateFromCsrV2Input!) { issueCertificateFromCsrV2(input: $i) { chainPem certificate { certificatePem } } }';
  const perRound = 2600;
  const needed = perRound * ROUNDS;
  let chainPem = '';
  const contexts = [];
  let issued = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (issued < needed) {
      const n = issued++;
      const r = (await graphql(http, ISSUE, { i: { entityId: device, csrPem, idempotencyKey: `pre-${n}` } }, token)).issueCertificateFromCsrV2;
      chainPem = r.chainPem;
      contexts.push(createSecureContext({ cert: r.certificate.certificatePem, key: keyPem }));
    }
  }));
  writeFileSync(f('bundle.pem'), chainPem + readFileSync(env.SVC_PKI_ROOT_CERT_PATH, 'utf8'));
  console.error(`issued ${contexts.length} client certificates`);
  const bareClose = await spawnServer({ args: [path.join(benchDir, 'lib', 'bare-mtls-server.js'), f('listener.pem'), f('listener.key'), f('bundle.pem'), 'false'], name: 'bare-mtls', ipc: true });
  const bareKeep = await spawnServer({ args: [path.join(benchDir, 'lib', 'bare-mtls-server.js'), f('listener.pem'), f('listener.key'), f('bundle.pem'), 'true'], name: 'bare-mtls-keepalive', ipc: true });
  const results = [];
  // The bare server may see a certificate again; the service renews each one once, so it takes unused ones.
  let bareNext = 0;
  let next = 0;
  const body = JSON.stringify({ csr_pem: csrPem, idempotency_key: 'bench' });
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const bare = await drive(`bare mTLS, new connection`, { bare: bareClose.pid }, () =>
        send({ port: bareClose.ports.bare, agent: false, secureContext: contexts[(bareNext++) % contexts.length], path: '/', body }));
      const svc = await drive(`service /pki/reenroll, new connection`, { service: service.pid }, () => {
        const ctx = contexts[next++];
        if (!ctx) throw new Error('out of certificates');
        return send({ port: service.ports.enrollment, agent: false, secureContext: ctx, path: '/pki/reenroll', body });
      });
      results.push({ round, bare, service: svc, efficiency: bare.cpuUsPerReq / svc.cpuUsPerReq });
    }
    // Keep-alive: persistent connections, one agent per loop.
    const one = contexts[0];
    const keepAgent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    const bareKa = await drive('bare mTLS, keep-alive', { bare: bareKeep.pid }, () =>
      send({ port: bareKeep.ports.bare, agent: keepAgent, secureContext: one, path: '/', body }));
    let k = 0;
    const enrollAgent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    const svcKa = await drive('service /pki/enroll (bearer), keep-alive', { service: service.pid }, () =>
      send({ port: service.ports.enrollment, agent: enrollAgent, path: '/pki/enroll', headers: { authorization: `Bearer ${deviceToken}` },
        body: JSON.stringify({ csr_pem: csrPem, idempotency_key: `ka-${k++}` }) }));
    results.push({ keepAlive: true, bare: bareKa, service: svcKa, efficiency: bareKa.cpuUsPerReq / svcKa.cpuUsPerReq });
  } finally {
    await bareClose.stop();
    await bareKeep.stop();
    await stopAllServices();
  }
  const out = { scenario: 'enroll-mtls', at: new Date().toISOString(), duration: DURATION, connections: CONNECTIONS, rounds: ROUNDS, results };
  writeFileSync(path.join(resultsDir, 'enroll-mtls.json'), JSON.stringify(out, null, 2));
  for (const r of results) console.log(`${r.keepAlive ? 'keep-alive' : `round ${r.round}`}: bare ${r.bare.cpuUsPerReq.toFixed(0)} µs/req (${r.bare.reqPerSec.toFixed(0)}/s), service ${r.service.cpuUsPerReq.toFixed(0)} µs/req (${r.service.reqPerSec.toFixed(0)}/s, statuses ${JSON.stringify(r.service.statuses)}), efficiency ${r.efficiency.toFixed(2)}`);
}

main().catch(async (err) => {
  console.error(err);
  await stopAllServices();
  process.exit(1);
});
