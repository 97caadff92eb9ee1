// Scenario: OCSP responses per server CPU-second. The same request mix (32 serials, a quarter revoked,
// SHA-1 CertIDs as openssl sends them, no nonce) against OpenSSL's own responder (`openssl ocsp -index
// ... -port`, single-threaded, a new connection per request, signing every answer) and against the
// service's POST /certs/issuers/:id/ocsp on the management listener (uWS) with a new connection per
// request; beside them the service with keep-alive, with a fresh nonce per request (signed every time,
// batched into worker tasks), its node:http publication listener (HTTP/1.0 like openssl's clients), and
// the floor: the bare uWS handler on new connections. Every client sends its whole request (OpenSSL
// 3.0's responder spins forever after a client leaves without one). CPU: the server's process tree, plus
// PostgreSQL for the service. Target: the service on new connections answers at least 3x OpenSSL's
// responses per CPU-second, or the floor's if that is lower.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { adminSession, graphql } from './auth-whoami-anon.js';
import { startBareServer } from '../lib/bare-server.js';
import { diffCpuSnapshots, takeCpuSnapshot } from '../lib/cpu.js';
import { runOcspLoad } from '../lib/ocsp-load.js';
import { ISSUE, pkiEnv } from '../lib/pki-fixture.js';
import { startService } from '../lib/service.js';

const SERIALS = 32;
const CONNECTIONS = 16;

const ssl = (/** @type {string[]} */ args) => execFileSync('openssl', args, { stdio: 'pipe' });

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(/** @type {number} */ port) {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => {
        // Send something whole: openssl's responder must never see a connection that says nothing.
        c.end('GET / HTTP/1.0\r\n\r\n');
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

const opensslTime = (/** @type {Date} */ d) => `${d.toISOString().replace(/[-:T]/g, '').slice(2, 14)}Z`;

/** One load against `pid` on `port`: responses, CPU seconds of the server (and PostgreSQL when asked). */
async function measure(label, pid, port, path, requests, opts, ctx) {
  let before;
  let after;
  const roots = (/** @type {number} */ gen) => ({ server: pid, generator: gen });
  // The service's PostgreSQL: the backends of its own database (other work on the shared cluster is not its).
  const pgOpts = opts.postgres ? { includePostgres: true, postgresBackendsOf: opts.postgres } : { includePostgres: false };
  const result = await runOcspLoad({
    port, path, requests, mode: opts.mode, nonce: opts.nonce ?? false, anyAnswer: opts.anyAnswer ?? false, http: opts.http ?? '1.1', connections: CONNECTIONS,
    warmupSeconds: ctx.warmupSeconds, durationSeconds: ctx.durationSeconds,
    onWindowStart: (gen) => { before = takeCpuSnapshot(roots(gen), { ...pgOpts, threads: true }); },
    onWindowEnd: (gen) => { after = takeCpuSnapshot(roots(gen), { ...pgOpts, threads: true }); },
  });
  const cpu = diffCpuSnapshots(before, after);
  // The service's PostgreSQL is shown apart, and added for the service as DESIGN.md counts it.
  const pgCpu = opts.postgres ? cpu.cpuSeconds.postgres ?? 0 : 0;
  const serverCpu = cpu.cpuSeconds.server + pgCpu;
  const row = {
    label, ...result, serverCpuSeconds: serverCpu, processCpuSeconds: cpu.cpuSeconds.server, pgCpuSeconds: pgCpu,
    generatorCpu: cpu.cpuSeconds.generator / cpu.wallSeconds, otherCpuSeconds: cpu.otherCpuSeconds,
    perCpuSecond: result.requests / Math.max(1e-9, serverCpu), perProcessCpuSecond: result.requests / Math.max(1e-9, cpu.cpuSeconds.server),
    cpuUsPerResponse: (serverCpu / Math.max(1, result.requests)) * 1e6,
    // The server's threads by name: µs of CPU and sleeps (voluntary context switches: wake-ups) per answer.
    threads: Object.fromEntries(Object.entries(cpu.threads.server ?? {}).filter(([, t]) => t.cpuSeconds > 0 || t.sleeps > 0).map(([name, t]) => [name, {
      cpuUsPerResponse: (t.cpuSeconds / Math.max(1, result.requests)) * 1e6, sleepsPerResponse: t.sleeps / Math.max(1, result.requests),
    }])),
  };
  console.error(`bench: pki-ocsp ${label}: ${Math.round(row.reqPerSec)}/s, ${Math.round(row.perCpuSecond)} per server CPU-s (${row.cpuUsPerResponse.toFixed(1)} µs; process alone ${Math.round(row.perProcessCpuSecond)}/CPU-s, pg ${pgCpu.toFixed(2)} s), p50 ${row.p50Us} µs, p99 ${row.p99Us} µs, ${row.errors} errors, gen cpu ${row.generatorCpu.toFixed(2)}, other cpu ${row.otherCpuSeconds.toFixed(1)} s; per answer by thread: ${Object.entries(row.threads).map(([n, t]) => `${n} ${t.cpuUsPerResponse.toFixed(1)} µs/${t.sleepsPerResponse.toFixed(2)} sleeps`).join(', ')}`);
  return row;
}

/** Rows of the same key over rounds as one: answers and CPU summed, p50 the rounds' median, p99 and max the worst. */
function pool(/** @type {string} */ key, /** @type {string} */ label, /** @type {any[]} */ each) {
  const sum = (/** @type {string} */ f) => each.reduce((a, r) => a + r[f], 0);
  const requests = sum('requests');
  const serverCpu = sum('serverCpuSeconds');
  const processCpu = sum('processCpuSeconds');
  const p50s = each.map((r) => r.p50Us).sort((a, b) => a - b);
  /** @type {Record<string, {cpuUsPerResponse: number, sleepsPerResponse: number}>} */
  const threads = {};
  for (const r of each) {
    for (const [name, t] of Object.entries(/** @type {Record<string, {cpuUsPerResponse: number, sleepsPerResponse: number}>} */ (r.threads))) {
      const into = (threads[name] ??= { cpuUsPerResponse: 0, sleepsPerResponse: 0 });
      into.cpuUsPerResponse += (t.cpuUsPerResponse * r.requests) / Math.max(1, requests);
      into.sleepsPerResponse += (t.sleepsPerResponse * r.requests) / Math.max(1, requests);
    }
  }
  return {
    key, label, rounds: each.length, requests, errors: sum('errors'), wallSeconds: sum('wallSeconds'), reqPerSec: requests / Math.max(1e-9, sum('wallSeconds')),
    p50Us: p50s[Math.floor(p50s.length / 2)], p99Us: Math.max(...each.map((r) => r.p99Us)), maxUs: Math.max(...each.map((r) => r.maxUs)),
    serverCpuSeconds: serverCpu, processCpuSeconds: processCpu, pgCpuSeconds: sum('pgCpuSeconds'), otherCpuSeconds: sum('otherCpuSeconds'),
    generatorCpu: sum('generatorCpu') / each.length,
    perCpuSecond: requests / Math.max(1e-9, serverCpu), perProcessCpuSecond: requests / Math.max(1e-9, processCpu),
    cpuUsPerResponse: (serverCpu / Math.max(1, requests)) * 1e6, threads,
  };
}

/**
 * Each path against OpenSSL's responder in the same rows: plain answers against its plain answers, nonce
 * answers against its nonce answers (it signs every answer either way), per server CPU-second; the
 * service's CPU counts the backends of its own database, as DESIGN.md counts PostgreSQL (these answers
 * read no rows), and the process alone is shown beside.
 * @param {Record<string, any>} by rows by key
 */
function ratiosOf(by) {
  let field = 'perCpuSecond';
  const ratio = (/** @type {string} */ ours, /** @type {string} */ theirs) =>
    by[ours] && by[theirs] ? by[ours][field] / by[theirs].perCpuSecond : null;
  const ratios = {
    plainNewConnection: ratio('close', 'openssl'),
    plainKeepAlive: ratio('keepalive', 'openssl'),
    nonceNewConnection: ratio('nonce', 'openssl-nonce'),
    nonceKeepAlive: ratio('nonce-keepalive', 'openssl-nonce'),
    http10NewConnection: ratio('http10', 'openssl'),
    http10NonceNewConnection: ratio('http10-nonce', 'openssl-nonce'),
    responderFloorNewConnection: ratio('floor-ocsp', 'openssl'),
    nonceFloorNewConnection: ratio('floor-nonce', 'openssl-nonce'),
    http10FloorNewConnection: ratio('floor-http10', 'openssl'),
    http10NonceFloorNewConnection: ratio('floor-http10-nonce', 'openssl-nonce'),
    netFloorNewConnection: ratio('floor-net', 'openssl'),
  };
  field = 'perProcessCpuSecond';
  const processAlone = {
    plainNewConnection: ratio('close', 'openssl'), plainKeepAlive: ratio('keepalive', 'openssl'), nonceNewConnection: ratio('nonce', 'openssl-nonce'),
    nonceKeepAlive: ratio('nonce-keepalive', 'openssl-nonce'), http10NewConnection: ratio('http10', 'openssl'),
    http10NonceNewConnection: ratio('http10-nonce', 'openssl-nonce'),
  };
  return { ratios, processAlone };
}

const TARGETS = { plainKeepAlive: 3, nonceNewConnection: 1, http10NewConnection: 1 };

/** The ratios as one line, with the verdict of each path that has a target. */
function describeRatios(/** @type {ReturnType<typeof ratiosOf>} */ { ratios, processAlone }) {
  const verdicts = Object.fromEntries(Object.entries(TARGETS).map(([k, goal]) => {
    const r = ratios[/** @type {keyof typeof ratios} */ (k)];
    return [k, r === null ? 'not measured' : r >= goal ? 'met' : 'missed'];
  }));
  const fmt = (/** @type {number | null} */ r) => (r === null ? '-' : `${r.toFixed(2)}x`);
  const text = `vs openssl per CPU-s: plain ${fmt(ratios.plainNewConnection)}, keep-alive ${fmt(ratios.plainKeepAlive)} (target 3x: ${verdicts.plainKeepAlive}), nonce ${fmt(ratios.nonceNewConnection)} (target 1x: ${verdicts.nonceNewConnection}), nonce keep-alive ${fmt(ratios.nonceKeepAlive)}, HTTP/1.0 listener ${fmt(ratios.http10NewConnection)} (target 1x: ${verdicts.http10NewConnection}), HTTP/1.0 listener with a nonce ${fmt(ratios.http10NonceNewConnection)}; process alone: ${Object.values(processAlone).map(fmt).join(', ')}; the floors: bare uWS, same bytes ${fmt(ratios.responderFloorNewConnection)}, with a P-256 signature (against openssl's nonce answers) ${fmt(ratios.nonceFloorNewConnection)}, bare node:http on HTTP/1.0 ${fmt(ratios.http10FloorNewConnection)}, the same with a P-256 signature ${fmt(ratios.http10NonceFloorNewConnection)}, bare node:net without an HTTP parser ${fmt(ratios.netFloorNewConnection)}`;
  return { text, verdicts };
}

export default {
  name: 'pki-ocsp',
  description: 'OCSP responses per server CPU-second: the service (new connection per request; keep-alive, nonce, HTTP/1.0 listener beside) vs openssl ocsp -index -port vs the bare uWS floor',
  server: 'none',
  async run(ctx) {
    const env = { ...pkiEnv('encrypted_database'), SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0', SVC_LOG_LEVEL: 'info' };
    const dir = dirname(env.SVC_PKI_ROOT_CERT_PATH);
    const f = (/** @type {string} */ n) => join(dir, n);
    const service = await startService({ env });
    const bare = await startBareServer();
    // A responder's floor: uWS reading the request and answering as many bytes as the service's answer.
    let bareOcsp = /** @type {Awaited<ReturnType<typeof startBareServer>> | null} */ (null);
    let bareNonce = /** @type {Awaited<ReturnType<typeof startBareServer>> | null} */ (null);
    let bareHttp10 = /** @type {Awaited<ReturnType<typeof startBareServer>> | null} */ (null);
    let bareHttp10Nonce = /** @type {Awaited<ReturnType<typeof startBareServer>> | null} */ (null);
    let bareNet = /** @type {Awaited<ReturnType<typeof startBareServer>> | null} */ (null);
    /** @type {import('node:child_process').ChildProcess | null} */
    let responder = null;
    try {
      // Leaves from the service (a tenant intermediate signs them), a quarter revoked.
      const http = service.ports.http;
      const token = await adminSession(http);
      const tenant = (await graphql(http, 'mutation { createTenant(input: {name: "bench-ocsp"}) { id } }', {}, token)).createTenant.id;
      const device = (await graphql(http, 'mutation ($t: ID!) { createEntity(input: {kind: device, name: "d", tenantId: $t}) { id } }', { t: tenant }, token)).createEntity.id;
      const csrPem = readFileSync(f('leaf.csr'), 'utf8');
      const ISSUE_PEM = ISSUE.replace('certificate { credentialId serialNumber }', 'chainPem certificate { credentialId serialNumber issuerId certificatePem }');
      const leaves = [];
      for (let i = 0; i < SERIALS; i++) {
        const out = (await graphql(http, ISSUE_PEM, { i: { entityId: device, csrPem, idempotencyKey: `ocsp-${i}` } }, token)).issueCertificateFromCsrV2;
        leaves.push({ ...out.certificate, chainPem: out.chainPem });
      }
      for (const leaf of leaves.slice(0, SERIALS / 4)) {
        await graphql(http, 'mutation ($i: RevokeCertificateV2Input!) { revokeCertificateV2(input: $i) { revokedAt } }', { i: { credentialId: leaf.credentialId, reason: 'key_compromise' } }, token);
      }
      const issuerId = leaves[0].issuerId;
      writeFileSync(f('ocsp-issuer.pem'), /** @type {string} */ (leaves[0].chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/)?.[0]));
      const ours = leaves.map((leaf, i) => {
        writeFileSync(f(`ocsp-leaf-${i}.pem`), leaf.certificatePem);
        ssl(['ocsp', '-issuer', f('ocsp-issuer.pem'), '-cert', f(`ocsp-leaf-${i}.pem`), '-no_nonce', '-reqout', f('ocsp-req.der')]);
        return readFileSync(f('ocsp-req.der')).toString('base64');
      });

      // OpenSSL's responder: the same serials and states in an index, signing with the platform intermediate (P-256 too).
      const revokedAt = opensslTime(new Date(Date.now() - 60_000));
      const notAfter = opensslTime(new Date(Date.now() + 86_400_000 * 30));
      writeFileSync(f('ocsp-index.txt'), leaves.map((l, i) => `${i < SERIALS / 4 ? 'R' : 'V'}\t${notAfter}\t${i < SERIALS / 4 ? `${revokedAt},keyCompromise` : ''}\t${l.serialNumber.toUpperCase()}\tunknown\t/CN=d${i}\n`).join(''));
      const theirs = leaves.map((l) => {
        ssl(['ocsp', '-issuer', f('int.pem'), '-serial', `0x${l.serialNumber}`, '-no_nonce', '-reqout', f('ocsp-req.der')]);
        return readFileSync(f('ocsp-req.der')).toString('base64');
      });
      const port = /** @type {number} */ (await freePort());
      responder = spawn('openssl', ['ocsp', '-index', f('ocsp-index.txt'), '-CA', f('root.pem'), '-rsigner', f('int.pem'), '-rkey', f('int.key'), '-port', String(port), '-nmin', '60', '-ignore_err'], { stdio: 'ignore' });
      await waitForPort(port);

      const path = `/certs/issuers/${issuerId}/ocsp`;
      // BENCH_OCSP_ROWS=key,key measures only those rows (profiling one path); the ratios need openssl and floor.
      const only = process.env.BENCH_OCSP_ROWS?.split(',');
      const wanted = (/** @type {string} */ key) => !only || only.includes(key);
      // The floors of the paths with targets: the responder floor (bare uWS reading the request and answering
      // as many bytes), the nonce floor (that plus one P-256 signature with the service's signer), the HTTP/1.0
      // floor (node:http, the parser this stack has that speaks 1.0) and under it node:net with no parser.
      let size = 0;
      if (['floor-ocsp', 'floor-nonce', 'floor-http10', 'floor-http10-nonce', 'floor-net'].some(wanted)) {
        size = Buffer.from(await (await fetch(`http://127.0.0.1:${http}/certs/issuers/${issuerId}/ocsp`, { method: 'POST', body: Buffer.from(/** @type {string} */ (ours[0]), 'base64') })).arrayBuffer()).length;
        if (wanted('floor-ocsp')) bareOcsp = await startBareServer({ replyBytes: size });
        if (wanted('floor-nonce')) bareNonce = await startBareServer({ replyBytes: size, sign: true });
        if (wanted('floor-http10')) bareHttp10 = await startBareServer({ replyBytes: size, nodeHttp: true });
        if (wanted('floor-http10-nonce')) bareHttp10Nonce = await startBareServer({ replyBytes: size, nodeHttp: true, sign: true });
        if (wanted('floor-net')) bareNet = await startBareServer({ replyBytes: size, rawNet: true });
      }
      const svc = { pid: service.pid, database: new URL(service.databaseUrl).pathname.slice(1) };
      const opensslPid = /** @type {number} */ (responder.pid);
      /** @type {[string, string, number, number, string, string[], any][]} key, label, pid, port, path, requests, options */
      const specs = [
        ['openssl', 'openssl ocsp responder, new connection per request', opensslPid, port, '/', theirs, { mode: 'close', http: '1.0' }],
        ['openssl-nonce', 'openssl ocsp responder, nonce, new connection per request', opensslPid, port, '/', theirs, { mode: 'close', http: '1.0', nonce: true }],
        ['floor', 'floor: bare uWS, new connection per request', bare.pid, bare.ports.http, '/', ours, { mode: 'close', anyAnswer: true }],
        ...(bareOcsp ? [['floor-ocsp', `floor: bare uWS reading the request, answering ${size} bytes, new connection per request`, bareOcsp.pid, bareOcsp.ports.http, '/', ours, { mode: 'close', anyAnswer: true }]] : []),
        ...(bareNonce ? [['floor-nonce', `floor: bare uWS reading the request, one P-256 signature, answering ${size} bytes, new connection per request`, bareNonce.pid, bareNonce.ports.http, '/', ours, { mode: 'close', anyAnswer: true }]] : []),
        ...(bareHttp10 ? [['floor-http10', `floor: bare node:http (HTTP/1.0) reading the request, answering ${size} bytes, new connection per request`, bareHttp10.pid, bareHttp10.ports.http, '/', ours, { mode: 'close', http: '1.0', anyAnswer: true }]] : []),
        ...(bareHttp10Nonce ? [['floor-http10-nonce', `floor: bare node:http (HTTP/1.0) reading the request, one P-256 signature, answering ${size} bytes, new connection per request`, bareHttp10Nonce.pid, bareHttp10Nonce.ports.http, '/', ours, { mode: 'close', http: '1.0', anyAnswer: true }]] : []),
        ...(bareNet ? [['floor-net', `floor: bare node:net, no HTTP parser, reading the request, answering ${size} bytes, new connection per request`, bareNet.pid, bareNet.ports.http, '/', ours, { mode: 'close', http: '1.0', anyAnswer: true }]] : []),
        ['close', 'service (uWS), new connection per request', svc.pid, http, path, ours, { mode: 'close', postgres: svc.database }],
        ['keepalive', 'service (uWS), keep-alive', svc.pid, http, path, ours, { mode: 'keepalive', postgres: svc.database }],
        ['nonce', 'service (uWS), nonce, new connection per request', svc.pid, http, path, ours, { mode: 'close', nonce: true, postgres: svc.database }],
        ['nonce-keepalive', 'service (uWS), nonce, keep-alive', svc.pid, http, path, ours, { mode: 'keepalive', nonce: true, postgres: svc.database }],
        ['http10', 'service (node:http listener, HTTP/1.0), new connection per request', svc.pid, service.ports.pki_publication, path, ours, { mode: 'close', http: '1.0', postgres: svc.database }],
        // What `openssl ocsp` sends by default: HTTP/1.0 with a nonce, to the URL in the leaf (this listener).
        ['http10-nonce', 'service (node:http listener, HTTP/1.0), nonce, new connection per request', svc.pid, service.ports.pki_publication, path, ours, { mode: 'close', http: '1.0', nonce: true, postgres: svc.database }],
      ].filter(([key]) => wanted(key));
      // BENCH_OCSP_ROUNDS=n: every row n times, taking turns, so a shared machine's drift reaches every row
      // alike; the figures are the rounds pooled (answers and CPU summed), the spread is the rounds' ratios.
      const rounds = Math.max(1, Number(process.env.BENCH_OCSP_ROUNDS ?? 1));
      /** @type {Record<string, any>[]} */
      const byRound = [];
      for (let r = 0; r < rounds; r++) {
        /** @type {Record<string, any>} */
        const got = {};
        for (const [key, label, pid, p, at, requests, opts] of specs) got[key] = { key, ...(await measure(label, pid, p, at, requests, opts, ctx)) };
        byRound.push(got);
        if (rounds > 1) console.error(`bench: pki-ocsp round ${r + 1}: ${describeRatios(ratiosOf(got)).text}`);
      }
      const rows = specs.map(([key, label]) => pool(key, label, byRound.map((g) => g[key])));
      const by = Object.fromEntries(rows.map((r) => [r.key, r]));
      const { ratios, processAlone } = ratiosOf(by);
      const described = describeRatios({ ratios, processAlone });
      const verdicts = described.verdicts;
      /** @type {Record<string, [number, number]>} */
      const spread = {};
      if (rounds > 1) {
        for (const k of Object.keys(ratios)) {
          const each = byRound.map((g) => ratiosOf(g).ratios[/** @type {keyof typeof ratios} */ (k)]).filter((v) => v !== null);
          if (each.length) spread[k] = [Math.min(...each), Math.max(...each)];
        }
      }
      console.error(`bench: pki-ocsp${rounds > 1 ? `, ${rounds} rounds pooled` : ''}: ${described.text}`);
      if (rounds > 1) console.error(`bench: pki-ocsp rounds' spread: ${Object.entries(spread).map(([k, [lo, hi]]) => `${k} ${lo.toFixed(2)}-${hi.toFixed(2)}x`).join(', ')}`);
      const main = by.close;
      const openssl = by.openssl;
      const floor = by.floor;
      if (!main || !openssl || !floor) return { requests: 0, wallSeconds: 1, p50Us: 0, p99Us: 0, maxUs: 0, errors: 0, serverCpuSeconds: 0, rows, ratios, processAlone, verdicts, spread, ocspRounds: rounds };
      const goal = Math.min(3 * openssl.perCpuSecond, floor.perCpuSecond);
      console.error(`bench: pki-ocsp: service ${Math.round(main.perCpuSecond)}/CPU-s vs openssl ${Math.round(openssl.perCpuSecond)}/CPU-s = ${(main.perCpuSecond / openssl.perCpuSecond).toFixed(2)}x; floor ${Math.round(floor.perCpuSecond)}/CPU-s; target min(3x openssl, floor) = ${Math.round(goal)}: ${main.perCpuSecond >= goal ? 'met' : 'missed'}`);
      return {
        requests: main.requests, wallSeconds: main.wallSeconds, p50Us: main.p50Us, p99Us: main.p99Us, maxUs: main.maxUs, errors: main.errors,
        serverCpuSeconds: main.serverCpuSeconds, rows, ratios, processAlone, verdicts, spread, ocspRounds: rounds, ratioToOpenssl: main.perCpuSecond / openssl.perCpuSecond, ratioToFloor: main.perCpuSecond / floor.perCpuSecond,
        targetPerCpuSecond: goal, met: main.perCpuSecond >= goal,
      };
    } finally {
      responder?.kill('SIGKILL');
      await bare.stop();
      await bareOcsp?.stop();
      await bareNonce?.stop();
      await bareHttp10?.stop();
      await bareHttp10Nonce?.stop();
      await bareNet?.stop();
      await service.stop();
    }
  },
};
