// Scenario: issue 21's second document, refused: a chain of 10,000 fragments, each spreading the previous
// once (378 KB with these names; the probe's was 478 KB). Each request is a new text (a numbered
// comment), so the compiled-query cache never answers it. The token bound stops the lexer at
// SVC_GRAPHQL_MAX_TOKENS; the body is still read and the JSON envelope parsed whole. Read its CPU per
// request next to graphql-typename's in the same run.
let document = 'query { ...F10000 }\nfragment F0 on Query { __typename }\n';
for (let i = 1; i <= 10_000; i++) document += `fragment F${i} on Query { ...F${i - 1} }\n`;
const tail = JSON.stringify(document).slice(1);

export default {
  name: 'graphql-fragment-chain',
  description: 'POST /graphql, anonymous: a 378 KB chain of 10,000 fragments, a new text each time; refused',
  request: () => ({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body: (seq, connection) => `{"query":"# ${connection}.${seq}\\n${tail}}`,
    expectedStatus: 200,
  }),
};
