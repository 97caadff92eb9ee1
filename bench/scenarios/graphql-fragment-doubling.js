// Scenario: issue 21's anonymous denial of service, refused: 30 fragments that each spread the previous
// twice (2^30 fields once expanded, 1.2 KB of text). Each request is a new text (a numbered comment), so
// the compiled-query cache never answers it: every request pays the whole check. Read its CPU per
// request next to graphql-typename's in the same run.
let document = 'query { ...F30 }\nfragment F0 on Query { __typename }\n';
for (let i = 1; i <= 30; i++) document += `fragment F${i} on Query { ...F${i - 1} ...F${i - 1} }\n`;

export default {
  name: 'graphql-fragment-doubling',
  description: 'POST /graphql, anonymous: 30 doubling fragments (2^30 fields expanded), a new text each time; refused',
  request: () => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body: (seq, connection) => JSON.stringify({ query: `# ${connection}.${seq}\n${document}` }),
    // The error contract answers 200 with {errors}: BAD_REQUEST 'query complexity 1073741824 exceeds ...'.
    expectedStatus: 200,
  }),
};
