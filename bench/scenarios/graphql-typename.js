// Scenario: the cheapest GraphQL request: body read, parse, validate, compiled-query cache, JSON reply.
const body = JSON.stringify({ query: '{ __typename }' });

export default {
  name: 'graphql-typename',
  description: 'POST /graphql {"query":"{ __typename }"} (GraphQL pipeline overhead, no resolver work)',
  target: { efficiency: 0.5 },
  request: () => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body,
    expectedStatus: 200,
  }),
};
