// Scenario: the certificate authority at 10 and at 10,000 tenants, in one run (issue 33.5). Two services
// on two databases with the same root and platform intermediate: one holds 10 tenant CAs, the other
// 10,000. The tenants are rows (see lib/fleet-world.js insertTenants for why not createTenant) whose CAs
// are provisioned through GraphQL provisionTenantAuthorityAutomatically, 8 in flight as an operator's
// script would (the provisioning createTenant's hook uses: key sealed in the database, certificate signed
// by the platform intermediate, audit event). Then, in alternating rounds on the pair: EST
// simplereenroll over mTLS under a tenant's label (a new TLS connection each), OCSP for that tenant's
// leaves (plain and with a nonce) and for its CA certificate (the platform intermediate's responder), the
// CRLs of both, gRPC ResolveCertificateV2; the sizes of cacerts (labelled and not), csrattrs and the trust
// bundle; last, the provisioning of 200 more CAs on each. Each figure at 10,000 against 10: none may grow
// by more than 20%. Stop it with Ctrl-C (SIGINT), which stops the services and drops their databases.
//   node bench/run.js pki-fleet --rounds 2 --duration 4 --warmup 1     (BENCH_FLEET_TENANTS=300 for a trial)
import { crlAnswers, estReenroll, grpcResolve, ocspAnswers, pooled, sizes } from '../lib/fleet-figures.js';
import { clientCertificates, countTenantCas, insertTenants, provisionTenants, provisioningRetries, seedProbe, startFleetService } from '../lib/fleet-world.js';

const SMALL = 10;
const LARGE = Number(process.env.BENCH_FLEET_TENANTS ?? 10_000);
/** Growth allowed at LARGE tenants against SMALL. */
const BOUND = 1.2;
const PROVISION = { concurrency: 8, window: Number(process.env.BENCH_FLEET_PROVISION_WINDOW ?? 200) };
const EST_LOAD = { connections: 8, warmup: 40, count: Number(process.env.BENCH_FLEET_EST_COUNT ?? 400) };
const CRL_LOAD = { connections: 8, warmup: 500, count: 12000 };

const fmt = (/** @type {number} */ v, d = 1) => v.toFixed(d);

export default {
  name: 'pki-fleet',
  description: `the CA at ${SMALL} vs ${LARGE} tenant CAs in one run: provisioning per CA, EST mTLS re-enroll, cacerts/trust bundle bytes, OCSP, CRL, gRPC ResolveCertificateV2`,
  server: 'none',
  // The worst figure's CPU per answer at SMALL ÷ at LARGE: at most 20% growth.
  target: { efficiency: 1 / BOUND },
  async run(/** @type {any} */ ctx) {
    const rounds = Math.max(1, ctx.rounds ?? 1);
    const pair = [await startFleetService(String(SMALL)), await startFleetService(String(LARGE))];
    try {
      const [small, large] = pair;
      const probes = [await seedProbe(small), await seedProbe(large)];
      const started = Date.now();
      // The probe tenant is the first of each; the others are rows, their CAs provisioned through the service.
      await provisionTenants(small, probes[0].admin, await insertTenants(small, 1, SMALL - 1), { concurrency: PROVISION.concurrency, chunk: SMALL - 1 });
      const bulk = await provisionTenants(large, probes[1].admin, await insertTenants(large, 1, LARGE - 1), {
        concurrency: PROVISION.concurrency, chunk: 1000,
        onChunk: (c) => console.error(`bench: pki-fleet provisioning ${c.casAfter}/${LARGE}: ${fmt(c.wallMsPerCa)} ms wall per CA, `
          + `${fmt(c.cpuMsPerCa)} ms CPU (process ${fmt(c.processCpuMsPerCa)}), p50 ${fmt(c.p50Ms)} ms p90 ${fmt(c.p90Ms)} ms, other cpu ${fmt(c.otherCpuSeconds)} s`),
      });
      const bulkSeconds = (Date.now() - started) / 1000;
      const counts = [await countTenantCas(small), await countTenantCas(large)];
      console.error(`bench: pki-fleet: ${LARGE} tenant CAs provisioned in ${fmt(bulkSeconds / 60)} min (${fmt((bulkSeconds / LARGE) * 1000)} ms each, `
        + `${PROVISION.concurrency} in flight, ${provisioningRetries()} calls retried); active CAs / tenants: ${counts.map((c) => `${c.cas}/${c.tenants}`).join(' and ')}`);
      for (const c of counts) if (c.cas !== c.tenants) throw new Error(`pki-fleet: ${c.tenants} tenants but ${c.cas} active tenant CAs`);

      const certs = await Promise.all(pair.map((s, i) => clientCertificates(s, probes[i], rounds * (EST_LOAD.warmup + EST_LOAD.count))));
      const byteSizes = [await sizes(small, probes[0]), await sizes(large, probes[1])];

      /** @type {Record<string, (i: number, round: number) => Promise<any>>} */
      const figures = {
        'est-simplereenroll-mtls': (i, round) => estReenroll(pair[i], probes[i], certs[i].slice(round * (EST_LOAD.warmup + EST_LOAD.count)), EST_LOAD),
        'ocsp-leaf': (i) => ocspAnswers(pair[i], probes[i].caId, probes[i].leafOcsp, ctx, { mode: 'close', nonce: false }),
        'ocsp-leaf-nonce': (i) => ocspAnswers(pair[i], probes[i].caId, probes[i].leafOcsp, ctx, { mode: 'close', nonce: true }),
        'ocsp-tenant-ca': (i) => ocspAnswers(pair[i], probes[i].platformIntermediateId, probes[i].chainOcsp, ctx, { mode: 'close', nonce: false }),
        'crl-tenant-ca': (i) => crlAnswers(pair[i], probes[i].caId, CRL_LOAD),
        'crl-platform-intermediate': (i) => crlAnswers(pair[i], probes[i].platformIntermediateId, CRL_LOAD),
        'grpc-resolve-certificate-v2': (i) => grpcResolve(pair[i], probes[i], ctx),
      };
      // BENCH_FLEET_FIGURES=name,name measures only those (looking into one figure).
      const only = process.env.BENCH_FLEET_FIGURES?.split(',');
      if (only) for (const name of Object.keys(figures)) if (!only.includes(name)) delete figures[name];
      /** @type {Record<string, any[][]>} */
      const windows = Object.fromEntries(Object.keys(figures).map((k) => [k, [[], []]]));
      for (let round = 0; round < rounds; round++) {
        for (const [name, measure] of Object.entries(figures)) {
          // Alternate which side goes first, so a drift of the machine does not always favour one.
          for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
            const w = await measure(i, round);
            windows[name][i].push(w);
            console.error(`bench: pki-fleet #${round + 1} ${name} at ${pair[i].label} tenants: ${w.requests} in ${fmt(w.wallSeconds, 2)} s, `
              + `${fmt(((w.serviceCpuSeconds + w.postgresCpuSeconds) / Math.max(1, w.requests)) * 1e6)} µs CPU each (process ${fmt((w.serviceCpuSeconds / Math.max(1, w.requests)) * 1e6)}), `
              + `p50 ${w.p50Us} µs, ${w.errors} errors${w.errors ? ` ${JSON.stringify(w.statuses ?? {})}` : ''}, other cpu ${fmt(w.otherCpuSeconds ?? 0)} s`);
          }
        }
      }
      // Provisioning last, so every figure above is at exactly SMALL and LARGE tenants.
      const provisioning = [
        (await provisionTenants(small, probes[0].admin, await insertTenants(small, SMALL, PROVISION.window), { concurrency: PROVISION.concurrency, chunk: PROVISION.window }))[0],
        (await provisionTenants(large, probes[1].admin, await insertTenants(large, LARGE, PROVISION.window), { concurrency: PROVISION.concurrency, chunk: PROVISION.window }))[0],
      ];

      const rows = Object.entries(windows).map(([name, [a, b]]) => {
        const at = [pooled(/** @type {any[]} */ (a)), pooled(/** @type {any[]} */ (b))];
        return { figure: name, unit: 'µs CPU per answer', small: at[0].cpuUsPerAnswer, large: at[1].cpuUsPerAnswer, ratio: at[1].cpuUsPerAnswer / at[0].cpuUsPerAnswer,
          processRatio: at[1].processCpuUsPerAnswer / at[0].processCpuUsPerAnswer, detail: at };
      });
      rows.push({ figure: 'provisioning', unit: 'ms CPU per tenant CA', small: provisioning[0].cpuMsPerCa, large: provisioning[1].cpuMsPerCa,
        ratio: provisioning[1].cpuMsPerCa / provisioning[0].cpuMsPerCa, processRatio: provisioning[1].processCpuMsPerCa / provisioning[0].processCpuMsPerCa, detail: provisioning });
      rows.push({ figure: 'provisioning-wall', unit: 'ms wall per tenant CA (8 in flight)', small: provisioning[0].wallMsPerCa, large: provisioning[1].wallMsPerCa,
        ratio: provisioning[1].wallMsPerCa / provisioning[0].wallMsPerCa, processRatio: null, detail: null });
      for (const key of /** @type {(keyof typeof byteSizes[0])[]} */ (Object.keys(byteSizes[0]))) {
        rows.push({ figure: key, unit: 'bytes', small: byteSizes[0][key], large: byteSizes[1][key], ratio: byteSizes[1][key] / byteSizes[0][key], processRatio: null, detail: null });
      }
      for (const r of rows) {
        console.error(`bench: pki-fleet ${r.figure}: ${fmt(r.small)} at ${SMALL}, ${fmt(r.large)} at ${LARGE} ${r.unit}: ${fmt(r.ratio, 2)}x`
          + `${r.processRatio ? ` (process alone ${fmt(r.processRatio, 2)}x)` : ''} ${r.ratio <= BOUND ? 'within' : 'OVER'} ${BOUND}x`);
      }
      const worst = rows.filter((r) => r.unit.startsWith('µs') || r.unit.startsWith('ms CPU')).reduce((w, r) => (r.ratio > w.ratio ? r : w));
      const over = rows.filter((r) => r.ratio > BOUND).map((r) => r.figure);
      console.error(`bench: pki-fleet: ${over.length ? `over ${BOUND}x: ${over.join(', ')}` : `every figure within ${BOUND}x`}; load average ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`);
      const main = worst.detail[1];
      return {
        // The run table's row: the CPU figure that grew most, at LARGE, against itself at SMALL.
        requests: main.requests, wallSeconds: main.requests / main.perSecond, p50Us: main.p50Us, p99Us: null, maxUs: null, errors: rows.reduce((a, r) => a + (r.detail?.[1]?.errors ?? 0) + (r.detail?.[0]?.errors ?? 0), 0),
        serverCpuSeconds: { service: (main.cpuUsPerAnswer * main.requests) / 1e6 }, baselineCpuPerRequestUs: worst.small,
        worstFigure: worst.figure, over, bound: BOUND, tenants: { small: SMALL, large: LARGE }, bulkProvisioning: { seconds: bulkSeconds, chunks: bulk },
        rows: rows.map(({ detail, ...r }) => ({ ...r, detail })), sizes: byteSizes,
      };
    } catch (err) {
      for (const s of pair) console.error(`bench: pki-fleet: the service at ${s.label} tenants logged last:\n${s.readTail()}`);
      throw err;
    } finally {
      await Promise.all(pair.map((s) => s.stop()));
    }
  },
};
