import t from 'tap';
import { AppError } from '../../src/errors.js';
import { baseGraphqlModule } from '../../src/graphql/base-module.js';
import { contextFor } from '../../src/graphql/context.js';
import { createGraphqlExecutor } from '../../src/graphql/executor.js';
import { buildSchema } from '../../src/graphql/schema.js';
import { gql, startTestService, testLogger } from '../helpers/service.js';

const probe = {
  name: 'probe',
  sdl: `
    type Item { id: ID!, children(limit: Int): [Item!]! }
    extend type Query {
      refused: String
      broken: String
      items(limit: Int): [Item!]!
    }`,
  resolvers: {
    Query: {
      refused: () => { throw new AppError('FORBIDDEN', 'forbidden'); },
      broken: () => { throw new Error('connection string postgres://secret@db'); },
      items: () => [{ id: '1', children: [] }],
    },
  },
};

/** The service's defaults (src/config.ts) unless the test says otherwise. */
const DEFAULT_LIMITS = {
  maxDepth: 20, maxComplexity: 10_000, maxTokens: 10_000, maxNesting: 64, maxFragments: 100, maxAliases: 100,
  maxPageSize: 100, jsonFieldCost: 10, answerMaxBytes: 16_777_216,
};

function executor(options: Partial<typeof DEFAULT_LIMITS & { introspection: boolean }> = {}) {
  return createGraphqlExecutor(buildSchema([baseGraphqlModule(), probe]), {
    ...DEFAULT_LIMITS,
    ...options,
    introspection: options.introspection ?? false,
    cacheSize: 10,
  }, testLogger());
}

const run = async (ex: ReturnType<typeof executor>, query: string) =>
  JSON.parse(await ex.execute({ query }, contextFor(null, 'req-1')));

t.test('resolver errors carry message, path and extensions; unknown errors hide internals', async (t) => {
  const ex = executor();
  const res = await run(ex, '{ refused broken health }');
  t.equal(res.data.health, 'ok', 'other fields still resolve');
  const [refused, broken] = res.errors;
  t.same(refused, {
    message: 'forbidden',
    locations: [{ line: 1, column: 3 }],
    path: ['refused'],
    extensions: { code: 'FORBIDDEN', retryable: false, requestId: 'req-1' },
  });
  t.equal(broken.message, 'internal error');
  t.equal(broken.extensions.code, 'INTERNAL');
  t.notMatch(JSON.stringify(res), 'secret');
});

t.test('the same query text is parsed, validated and compiled once', async (t) => {
  const ex = executor();
  await run(ex, '{ health }');
  await run(ex, '{ health }');
  await run(ex, '{ health }');
  t.equal(ex.stats.compilations, 1);
  await run(ex, '{ __typename health }');
  t.equal(ex.stats.compilations, 2);
  t.equal(ex.stats.cached, 2);
});

t.test('depth and complexity limits', async (t) => {
  const deep = executor({ maxDepth: 3 });
  const res = await run(deep, '{ items { children { children { id } } } }');
  t.match(res.errors[0].message, 'query depth 4 exceeds the maximum of 3');
  t.equal(res.errors[0].extensions.code, 'BAD_REQUEST');
  const costly = executor({ maxComplexity: 5 });
  const wide = await run(costly, '{ a: health b: health c: health d: health e: health f: health g: health }');
  t.match(wide.errors[0].message, 'query complexity 7 exceeds the maximum of 5');
  t.notOk((await run(costly, '{ items(limit: 4) { id } }')).errors, 'a page of 4 items of one field costs 5');
  t.match((await run(costly, '{ items(limit: 5) { id } }')).errors[0].message, 'query complexity 6 exceeds the maximum of 5', 'each item counts');
});

t.test('introspection follows its switch', async (t) => {
  t.match((await run(executor(), '{ __schema { queryType { name } } }')).errors[0].message, 'introspection has been disabled');
  t.same((await run(executor({ introspection: true }), '{ __schema { queryType { name } } }')).data,
    { __schema: { queryType: { name: 'Query' } } });
});

t.test('over HTTP: syntax and validation errors use the documented shape with HTTP 200', async (t) => {
  const { url } = await startTestService(t);
  const syntax = await gql(url(), '{ health ');
  t.equal(syntax.status, 200);
  t.equal(syntax.body.errors![0].extensions.code, 'BAD_REQUEST');
  t.match(syntax.body.errors![0].message, 'Syntax Error');
  t.type(syntax.body.errors![0].extensions.requestId, 'string');
  const invalid = await gql(url(), '{ nothingHere }');
  t.equal(invalid.status, 200);
  t.match(invalid.body.errors![0], { message: 'Cannot query field "nothingHere" on type "Query".', extensions: { code: 'BAD_REQUEST' } });
  const ok = await gql(url(), 'query Q { health }');
  t.same(ok.body, { data: { health: 'ok' } });

  const res = await fetch(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'abc.123' }, body: '{"query": 1}' });
  t.equal(res.status, 400);
  t.equal(res.headers.get('x-request-id'), 'abc.123', 'a valid incoming request id is echoed');
  t.match(await res.json(), { errors: [{ message: 'query must be a non-empty string', extensions: { code: 'BAD_REQUEST', requestId: 'abc.123' } }] });
  const notJson = await fetch(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
  t.equal(notJson.status, 415);
  // Bytes that are not UTF-8 inside a string: decoding would have replaced them with U+FFFD.
  const latin1 = await fetch(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.from('{"query":"{ health }","operationName":"caf\xe9"}', 'latin1') });
  t.equal(latin1.status, 400);
  t.match(await latin1.json(), { errors: [{ message: 'request body is not valid UTF-8', extensions: { code: 'BAD_REQUEST' } }] });
  // A lone surrogate escape in a variable would be stored as U+FFFD; a pair (an emoji) is text.
  const lone = await fetch(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"query Q($n: String) { health }","variables":{"n":"x\\ud800"}}' });
  t.equal(lone.status, 400);
  t.match(await lone.json(), { errors: [{ message: 'request body holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text' }] });
  const pair = await fetch(`${url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"{ health }","variables":{"n":"x\\ud83d\\ude00"}}' });
  t.same(await pair.json(), { data: { health: 'ok' } }, 'a pair is text: the request is run');
});
