// Scenario: a custom endpoint: GET /api/custom/bench/entity?id=... mapping the query parameter into the
// same query custom-endpoint-graphql sends to /graphql (routing table, bearer, action check, mapping,
// the /graphql executor, response shaping, the execution record).
// Target: server CPU per request at most 1.25x custom-endpoint-graphql's, same run (compare the rows).
import { AUTH_BENCH_ENV, adminSession, graphql } from './auth-whoami-anon.js';
import { ADMIN_ENTITY_ID, ENTITY_QUERY } from './custom-endpoint-graphql.js';

const PATH = '/api/custom/bench/entity';

export default {
  name: 'custom-endpoint-get',
  description: `GET ${PATH}?id= mapped into entity(id) (compare cpu µs/req with custom-endpoint-graphql: <= 1.25x)`,
  // A service of its own (the limit is the default, named to make the env differ): on one service shared
  // with custom-endpoint-graphql, whichever of the two ran second paid 30-50% more CPU per request in
  // either order (state the first left behind), which no comparison of the two should carry.
  env: { ...AUTH_BENCH_ENV, SVC_CUSTOM_ENDPOINT_TIMEOUT_MS: '5000' },
  async setup(/** @type {any} */ ctx) {
    const token = await adminSession(ctx.ports.http);
    const existing = await graphql(ctx.ports.http, 'query { apiEndpoints(status: "active", limit: 100) { items { path } } }', {}, token);
    if (!existing.apiEndpoints.items.some((/** @type {{path: string}} */ e) => e.path === PATH)) {
      await graphql(ctx.ports.http, 'mutation ($i: CreateApiEndpointInput!) { createApiEndpoint(input: $i) { id } }', {
        i: {
          key: 'bench_entity', name: 'bench entity', method: 'GET', path: PATH, operationKind: 'query', graphql: ENTITY_QUERY,
          variablesMapping: { id: '$query.id' }, status: 'active',
        },
      }, token);
    }
    const check = await fetch(`http://127.0.0.1:${ctx.ports.http}${PATH}?id=${ADMIN_ENTITY_ID}`, { headers: { authorization: `Bearer ${token}` } });
    const body = await check.json();
    if (check.status !== 200 || body.entity?.id !== ADMIN_ENTITY_ID) throw new Error(`bench setup: the endpoint answered ${check.status} ${JSON.stringify(body)}`);
    return { token };
  },
  request: (/** @type {any} */ ctx) => ({
    method: 'GET',
    path: `${PATH}?id=${ADMIN_ENTITY_ID}`,
    headers: { authorization: `Bearer ${ctx.data.token}` },
    expectedStatus: 200,
  }),
};
