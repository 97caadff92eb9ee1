// Scenario: bearer verification of an unscoped access token (svc_...) on a trivial query (cache hit).
// Target: server CPU per request at most 1.25x auth-whoami-anon's, same run (compare the two rows).
import { AUTH_BENCH_ENV, WHOAMI, adminSession, graphql } from './auth-whoami-anon.js';

export default {
  name: 'auth-bearer-token',
  description: 'POST /graphql { whoami } with an access token (compare cpu µs/req with auth-whoami-anon: <= 1.25x)',
  env: AUTH_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    const admin = await adminSession(ctx.ports.http);
    const data = await graphql(ctx.ports.http, 'mutation { createAccessToken(input: {name: "bench", scoped: false, permissions: []}) { token } }', {}, admin);
    return { token: data.createAccessToken.token };
  },
  request: (/** @type {any} */ ctx) => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.data.token}` },
    body: WHOAMI,
    expectedStatus: 200,
  }),
};
