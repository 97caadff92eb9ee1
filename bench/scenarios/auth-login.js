// Scenario: password logins (POST /auth/login) at the service's default scrypt parameters. The ceiling
// is set by the KDF: 2 cores ÷ the wall time of one hash, measured here in the same run with the same
// parameters. Target: loginRatio = logins/s ÷ ceiling >= 0.8 (efficiency is not the measure here: a
// login is meant to cost about one hash of CPU). Because a shared machine starves the service of the
// cores the ceiling assumes, the teardown also reports hashesPerLoginCpu: one hash's CPU time ÷ the
// service's CPU time per login over the same span (1.0 = a login costs exactly one hash).
import { scrypt } from 'node:crypto';
import { availableParallelism } from 'node:os';
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from '../lib/cpu.js';
import { AUTH_BENCH_ENV } from './auth-whoami-anon.js';

// The service's defaults (src/config.ts SVC_SCRYPT_*): the bench does not override them.
const PARAMS = { N: 16384, r: 8, p: 1, maxmem: 128 * 16384 * 8 + 1024 * 1024 };

/** Median wall time and mean CPU time of one hash, run one at a time so nothing of ours competes. */
async function measureHash(samples = 15) {
  const times = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < samples; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve, reject) => scrypt('bench-admin-secret-0123456789', `salt-${i}-0123456789`, 32, PARAMS, (e, k) => (e ? reject(e) : resolve(k))));
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort((a, b) => a - b);
  return { wall: /** @type {number} */ (times[Math.floor(times.length / 2)]), cpu: (cpu.user + cpu.system) / 1e6 / samples };
}

/** @param {string} url */
async function countSessions(url) {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select count(*)::int as n from sessions`;
    return /** @type {number} */ (row?.n ?? 0);
  } finally {
    await sql.end();
  }
}

/** Bench-process state between setup and teardown (ctx.data must stay plain JSON: it goes to the generator). */
let span = /** @type {{hash: {wall: number, cpu: number}, sessions: number, cpu: any} | null} */ (null);

export default {
  name: 'auth-login',
  description: 'POST /auth/login (password, scrypt N=16384 r=8 p=1); loginRatio = logins/s ÷ (2 ÷ hash time), target >= 0.8',
  env: AUTH_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    span = {
      hash: await measureHash(), sessions: await countSessions(ctx.databaseUrl),
      cpu: takeCpuSnapshot({ service: ctx.target.pid }, { includePostgres: false }),
    };
    return null;
  },
  request: () => ({
    method: 'POST',
    path: '/auth/login',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'admin', secret: AUTH_BENCH_ENV.SVC_ADMIN_SECRET }),
    expectedStatus: 200,
  }),
  async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
    const before = /** @type {NonNullable<typeof span>} */ (span);
    const used = diffCpuSnapshots(before.cpu, takeCpuSnapshot({ service: ctx.target.pid }, { includePostgres: false }));
    const logins = (await countSessions(ctx.databaseUrl)) - before.sessions;
    const after = await measureHash();
    const hashWall = Math.min(before.hash.wall, after.wall);
    const hashCpu = Math.min(before.hash.cpu, after.cpu);
    const cores = Math.min(2, availableParallelism());
    const ceiling = cores / hashWall;
    const loginsPerSec = result.requests / result.wallSeconds;
    const loginRatio = loginsPerSec / ceiling;
    const serviceCpuPerLogin = logins > 0 ? (used.cpuSeconds.service ?? 0) / logins : null;
    const hashesPerLoginCpu = serviceCpuPerLogin ? hashCpu / serviceCpuPerLogin : null;
    console.error(`bench: auth-login: one hash ${(hashWall * 1000).toFixed(1)} ms wall, ${(hashCpu * 1000).toFixed(1)} ms CPU; `
      + `ceiling ${cores}/hash = ${ceiling.toFixed(1)} logins/s; measured ${loginsPerSec.toFixed(1)} logins/s; `
      + `loginRatio ${loginRatio.toFixed(2)} (target >= 0.8) ${loginRatio >= 0.8 ? 'PASS' : 'MISS'}; `
      + `service CPU per login ${serviceCpuPerLogin === null ? '-' : (serviceCpuPerLogin * 1000).toFixed(1)} ms over ${logins} logins `
      + `(hash CPU / login CPU ${hashesPerLoginCpu === null ? '-' : hashesPerLoginCpu.toFixed(2)}); machine CPU used by others in the window: ${result.otherCpuSeconds ?? '-'} s`);
    return {
      hashWallSeconds: hashWall, hashCpuSeconds: hashCpu, loginCeilingPerSec: ceiling, loginsPerSec, loginRatio, loginTarget: 0.8,
      spanLogins: logins, serviceCpuPerLoginSeconds: serviceCpuPerLogin, hashesPerLoginCpu,
    };
  },
};
