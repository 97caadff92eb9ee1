// Scenario: the reference for custom-endpoint-get: the same query sent to POST /graphql directly, with
// the same bearer token and the same variable.
import { AUTH_BENCH_ENV, adminSession } from './auth-whoami-anon.js';

export const ENTITY_QUERY = 'query ($id: ID!) { entity(id: $id) { id name kind } }';
/** The seeded administrator: the entity both scenarios read. */
export const ADMIN_ENTITY_ID = '00000000-0000-0000-0000-000000000001';

export default {
  name: 'custom-endpoint-graphql',
  description: 'POST /graphql entity(id) { id name kind } with a session JWT (reference for custom-endpoint-get)',
  env: AUTH_BENCH_ENV,
  async setup(/** @type {any} */ ctx) {
    return { token: await adminSession(ctx.ports.http), body: JSON.stringify({ query: ENTITY_QUERY, variables: { id: ADMIN_ENTITY_ID } }) };
  },
  request: (/** @type {any} */ ctx) => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.data.token}` },
    body: ctx.data.body,
    expectedStatus: 200,
  }),
};
