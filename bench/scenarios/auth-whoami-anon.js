// Scenario: the reference for bearer verification: `{ whoami { entityId } }` without credentials
// (the same query and resolver as auth-bearer-*, minus the token). Also exports what the other auth-*
// scenarios share: one service env (so they share one service in a run) and admin login via the API.
export const AUTH_BENCH_ENV = { SVC_ADMIN_SECRET: 'bench-admin-secret-0123456789' };
export const WHOAMI = JSON.stringify({ query: '{ whoami { entityId } }' });

/** @param {number} port @param {string} query @param {Record<string, unknown>} [variables] @param {string} [token] */
export async function graphql(port, query, variables, token) {
  const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = /** @type {{data?: any, errors?: any[]}} */ (await res.json());
  if (body.errors) throw new Error(`bench setup: ${JSON.stringify(body.errors)}`);
  return body.data;
}

/** @param {number} port */
export async function adminSession(port) {
  const data = await graphql(port, 'mutation ($s: String!) { login(input: {identifier: "admin", secret: $s}) { token } }', { s: AUTH_BENCH_ENV.SVC_ADMIN_SECRET });
  return /** @type {string} */ (data.login.token);
}

export default {
  name: 'auth-whoami-anon',
  description: 'POST /graphql { whoami } without a token (reference for auth-bearer-*)',
  env: AUTH_BENCH_ENV,
  request: () => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body: WHOAMI,
    expectedStatus: 200,
  }),
};
