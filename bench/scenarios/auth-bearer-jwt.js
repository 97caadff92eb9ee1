// Scenario: bearer verification of a session JWT on a trivial query (verified-token cache hit: no SQL).
// Target: server CPU per request at most 1.25x auth-whoami-anon's, same run (compare the two rows).
import { AUTH_BENCH_ENV, WHOAMI, adminSession } from './auth-whoami-anon.js';

export default {
  name: 'auth-bearer-jwt',
  description: 'POST /graphql { whoami } with a session JWT (compare cpu µs/req with auth-whoami-anon: <= 1.25x)',
  env: AUTH_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    return { token: await adminSession(ctx.ports.http) };
  },
  request: (/** @type {any} */ ctx) => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.data.token}` },
    body: WHOAMI,
    expectedStatus: 200,
  }),
};
