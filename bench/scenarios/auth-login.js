// Scenario: password logins (POST /auth/login) at the service's configured scrypt parameters. The
// ceiling is set by the KDF: 2 cores ÷ the time of one hash, measured here in the same run with the
// same parameters. Target: logins/s >= 0.8 x that ceiling (reported as loginRatio; efficiency is not
// the measure here: a login is meant to cost ~one hash of CPU).
import { scrypt } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { AUTH_BENCH_ENV } from './auth-whoami-anon.js';

// The service's defaults (src/config.ts SVC_SCRYPT_*): the bench does not override them.
const PARAMS = { N: 16384, r: 8, p: 1, maxmem: 128 * 16384 * 8 + 1024 * 1024 };

/** Median wall time of one hash, run one at a time so nothing else competes. */
async function hashSeconds(samples = 15) {
  const times = [];
  for (let i = 0; i < samples; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve, reject) => scrypt('bench-admin-secret-0123456789', `salt-${i}-0123456789`, 32, PARAMS, (e, k) => (e ? reject(e) : resolve(k))));
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  times.sort((a, b) => a - b);
  return /** @type {number} */ (times[Math.floor(times.length / 2)]);
}

export default {
  name: 'auth-login',
  description: 'POST /auth/login (password, default scrypt N=16384 r=8 p=1); loginRatio = logins/s ÷ (2 ÷ hash time), target >= 0.8',
  env: AUTH_BENCH_ENV,
  async setup() {
    return { hashSecondsBefore: await hashSeconds() };
  },
  request: () => ({
    method: 'POST',
    path: '/auth/login',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'admin', secret: AUTH_BENCH_ENV.SVC_ADMIN_SECRET }),
    expectedStatus: 200,
  }),
  async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
    const after = await hashSeconds();
    const hash = Math.min(ctx.data.hashSecondsBefore, after);
    const cores = Math.min(2, availableParallelism());
    const ceiling = cores / hash;
    const loginsPerSec = result.requests / result.wallSeconds;
    const loginRatio = loginsPerSec / ceiling;
    console.error(`bench: auth-login: one hash ${(hash * 1000).toFixed(1)} ms (before ${(ctx.data.hashSecondsBefore * 1000).toFixed(1)}, after ${(after * 1000).toFixed(1)}), `
      + `ceiling ${cores}/hash = ${ceiling.toFixed(1)} logins/s, measured ${loginsPerSec.toFixed(1)} logins/s, ratio ${loginRatio.toFixed(2)} (target >= 0.8) ${loginRatio >= 0.8 ? 'PASS' : 'MISS'}`);
    return { hashSeconds: hash, hashSecondsBefore: ctx.data.hashSecondsBefore, hashSecondsAfter: after, loginCeilingPerSec: ceiling, loginsPerSec, loginRatio, loginTarget: 0.8 };
  },
};
