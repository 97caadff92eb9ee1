// createTenant's cost for one creator as the tenants it created grow (issues 33/35: what grows with
// tenants). The platform administrator creates tenants through GraphQL createTenant, one at a time; each
// gives it the tenant-admin role of the new tenant. Figures: CPU per tenant (the service process with its
// workers, and the PostgreSQL backends of its own database) and wall time per call, over the first block
// of tenants and over a block after `--gap` more, created unmeasured a few at a time. Flat means the
// creator's next decisions do not re-read the roles of every tenant it made before.
// No certificate authority is configured: its provisioning (flat per tenant, pki-fleet) is not measured.
//   node bench/tenant-create.js [--block 500] [--gap 1500] [--in-flight 4]
import { startCpuWindow } from './lib/cpu.js';
import { startService, stopAllServices } from './lib/service.js';
import { AUTH_BENCH_ENV, adminSession, graphql } from './scenarios/auth-whoami-anon.js';

const arg = (/** @type {string} */ name, /** @type {number} */ fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const BLOCK = arg('block', 500);
const GAP = arg('gap', 1500);
const IN_FLIGHT = arg('in-flight', 4);
const CREATE = 'mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }';

const service = await startService({ env: AUTH_BENCH_ENV });
try {
  const port = service.ports.http;
  const token = await adminSession(port);
  const database = new URL(service.databaseUrl).pathname.slice(1);
  let made = 0;
  const create = () => {
    made++;
    return graphql(/** @type {number} */ (port), CREATE, { i: { name: `bench-tenant-${made}` } }, token);
  };

  /** One measured block: `BLOCK` tenants one after the other. */
  const measure = async () => {
    const from = made + 1;
    const window = startCpuWindow({ service: service.pid }, { includePostgres: true, postgresBackendsOf: database });
    for (let i = 0; i < BLOCK; i++) await create();
    const w = window.stop();
    const ms = (/** @type {number} */ s) => (s * 1000) / BLOCK;
    return {
      tenants: `${from}-${made}`,
      serviceCpuMs: ms(w.cpuSeconds.service ?? 0),
      postgresCpuMs: ms(w.cpuSeconds.postgres ?? 0),
      cpuMs: ms((w.cpuSeconds.service ?? 0) + (w.cpuSeconds.postgres ?? 0)),
      wallMs: ms(w.wallSeconds),
      otherCpuS: w.otherCpuSeconds,
    };
  };

  const first = await measure();
  const gapStarted = Date.now();
  const gapEnd = made + GAP;
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (made < gapEnd) await create();
  }));
  const gapSeconds = (Date.now() - gapStarted) / 1000;
  const later = await measure();
  const f = (/** @type {number} */ n) => n.toFixed(2);
  console.log('block             cpu ms/tenant (service + postgres)   wall ms/tenant   other cpu s');
  for (const b of [first, later]) {
    console.log(`${b.tenants.padEnd(16)}  ${f(b.cpuMs)} (${f(b.serviceCpuMs)} + ${f(b.postgresCpuMs)})`.padEnd(53) + `${f(b.wallMs).padEnd(17)}${f(b.otherCpuS)}`);
  }
  console.log(`later / first: cpu ${(later.cpuMs / first.cpuMs).toFixed(2)}×, wall ${(later.wallMs / first.wallMs).toFixed(2)}×; ` +
    `gap of ${GAP} tenants (${IN_FLIGHT} in flight) in ${gapSeconds.toFixed(1)} s`);
} finally {
  await stopAllServices();
}
