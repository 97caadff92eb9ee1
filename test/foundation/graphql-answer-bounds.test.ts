// Issue 32 point 1, at the executor: a query's cost grows with limit × selection, across aliases, fragments
// and variables (a JSON field costing more than a scalar), measured before execution in time linear in the
// document; and one answer is capped in bytes, serialised one root field at a time and given up at the
// cap, so a query asking for too much is answered one error and its whole text is never built.
import { parse } from 'graphql';
import t from 'tap';
import { baseGraphqlModule } from '../../src/graphql/base-module.js';
import { contextFor } from '../../src/graphql/context.js';
import { createGraphqlExecutor, type ExecutorOptions } from '../../src/graphql/executor.js';
import { checkDocument } from '../../src/graphql/limits.js';
import { buildSchema } from '../../src/graphql/schema.js';
import { testLogger } from '../helpers/service.js';

let docsResolved = 0;
const probe = {
  name: 'probe',
  sdl: `
    type Item { id: ID!, name: String, doc: JSON, children(limit: Int): [Item!]!, tags: [String!]! }
    type ItemPage { total: Int!, items: [Item!]! }
    extend type Query {
      items(limit: Int): [Item!]!
      page(limit: Int = 10): ItemPage!
      blob(bytes: Int!): JSON
      text(chars: Int!): String
    }`,
  resolvers: {
    Query: {
      // Pages clamped to 1..50, as the service's lists clamp to SVC_LIST_MAX_LIMIT.
      items: (_: unknown, a: { limit?: number }) => Array.from({ length: Math.min(50, a.limit ?? 3) }, (_, i) => item(i)),
      page: (_: unknown, a: { limit: number }) => ({ total: a.limit, items: Array.from({ length: a.limit }, (_, i) => item(i)) }),
      // Asynchronous, as a stored document read from the database is.
      blob: async (_: unknown, a: { bytes: number }) => {
        docsResolved++;
        return { pad: 'x'.repeat(a.bytes - 10) };
      },
      text: (_: unknown, a: { chars: number }) => 'y'.repeat(a.chars),
    },
    Item: {
      children: (_: unknown, a: { limit?: number }) => Array.from({ length: a.limit ?? 2 }, (_, i) => item(i)),
    },
  },
};
const item = (i: number) => ({ id: String(i), name: `n${i}`, doc: { i }, tags: ['a'] });

const schema = buildSchema([baseGraphqlModule(), probe]);
const BASE: ExecutorOptions = {
  maxDepth: 20, maxComplexity: 100, maxTokens: 10_000, maxNesting: 64, maxFragments: 100, maxAliases: 100,
  maxPageSize: 50, jsonFieldCost: 10, answerMaxBytes: 10_000, introspection: false, cacheSize: 100,
};
const executor = (over: Partial<ExecutorOptions> = {}) => createGraphqlExecutor(schema, { ...BASE, ...over }, testLogger());
const ex = executor();
const run = async (query: string, variables?: Record<string, unknown>, e = ex) =>
  JSON.parse(await e.execute({ query, variables }, contextFor(null, 'req'))) as { data?: any; errors?: { message: string; extensions: { code: string } }[] };
const complexity = (cost: number) => [{ message: `query complexity ${cost} exceeds the maximum of 100`, code: 'BAD_REQUEST' }];
const refusal = async (query: string, variables?: Record<string, unknown>) => (await run(query, variables)).errors?.map((e) => ({ message: e.message, code: e.extensions.code }));

t.test('a page counts its items: cost grows with limit × selection', async (t) => {
  t.equal((await run('{ items(limit: 10) { id name } }')).data.items.length, 10, '1 + 10 × 2 = 21');
  t.same(await refusal('{ items(limit: 20) { id name doc } }'), complexity(241), '1 + 20 × (1 + 1 + 10): a JSON field costs 10');
  t.same(await refusal('{ items(limit: 10) { doc } }'), complexity(101));
  t.notOk((await run('{ items(limit: 9) { doc } }')).errors, '1 + 9 × 10 = 91');
  t.same(await refusal('{ items(limit: 10) { id children(limit: 5) { id name } } }'), complexity(121), 'nested pages multiply: 1 + 10 × (1 + 1 + 5 × 2)');
  t.notOk((await run('{ items(limit: 1000) { id } }')).errors, 'a literal limit counts as the list reads it, clamped to the largest page (50): 51');
  t.same(await refusal('{ items { id name } }'), complexity(101), 'no limit and no default: the largest page');
  t.notOk((await run('{ page { total items { id name } } }')).errors, "a page object: its lists multiplied by the schema's default limit (10): 1 + 1 + 1 + 10 × 2 = 23");
  t.same(await refusal('{ page(limit: 40) { total items { id name tags } } }'), complexity(123), 'tags, a list without a limit, counts once per item: 1 + 1 + 1 + 40 × 3');
});

t.test('across aliases and fragments, each fragment measured once', async (t) => {
  t.notOk((await run('{ a: items(limit: 10) { id name } b: items(limit: 10) { id name } }')).errors, '2 × 21 = 42');
  const five = `{ ${['a', 'b', 'c', 'd', 'e'].map((a) => `${a}: items(limit: 10) { id name }`).join(' ')} }`;
  t.same(await refusal(five), complexity(105), '5 × 21');
  const fragments = '{ a: items(limit: 4) { ...F } b: items(limit: 4) { ...F } } fragment F on Item { id doc children(limit: 2) { ...G } } fragment G on Item { name }';
  t.same(await refusal(fragments), complexity(114), '2 × (1 + 4 × (1 + 10 + 1 + 2 × 1))');
  const typing = { schema, maxPageSize: 50, jsonFieldCost: 10 };
  const checked = checkDocument(parse(fragments), BASE, typing);
  t.equal(checked.fragmentVisits, 2, 'F and G measured once each');
  const inline = '{ items(limit: 10) { ... on Item { doc } } }';
  t.same(await refusal(inline), complexity(101), 'inline fragments take their type condition');
});

t.test('a limit from a variable counts as given; unknown at compile time, it is measured per request', async (t) => {
  const q = 'query ($n: Int) { items(limit: $n) { id name } }';
  t.equal((await run(q, { n: 10 })).data.items.length, 10, '21');
  t.same(await refusal(q, { n: 50 }), complexity(101), 'the same text with a larger page: refused');
  t.same(await refusal(q, {}), complexity(101), 'not given: the largest page');
  t.equal((await run('query ($n: Int = 10) { items(limit: $n) { id name } }', {})).data.items.length, 10, "the variable's default");
  const aliased = 'query ($n: Int) { a: items(limit: $n) { id } b: items(limit: $n) { id } c: items(limit: $n) { id } }';
  t.notOk((await run(aliased, { n: 30 })).errors, '3 × 31 = 93');
  t.same(await refusal(aliased, { n: 33 }), complexity(102), 'across aliases: 3 × 34');
  const before = ex.stats.compilations;
  await run(q, { n: 3 });
  t.equal(ex.stats.compilations, before, 'the text is compiled once; only its cost is measured again');
  const { costDependsOnVariables } = checkDocument(parse(q), BASE, { schema, maxPageSize: 50, jsonFieldCost: 10 });
  t.ok(costDependsOnVariables, 'over the maximum only at the largest page a variable could ask for');
  t.notOk(checkDocument(parse('query ($n: Int) { items(limit: $n) { id } }'), BASE, { schema, maxPageSize: 50, jsonFieldCost: 10 }).costDependsOnVariables,
    'within the maximum at the largest page: nothing left to measure per request');
});

t.test('one answer is capped: one error, without partial data, in UTF-8 bytes', async (t) => {
  t.same((await run('{ blob(bytes: 4000) }')).data, { blob: { pad: 'x'.repeat(3990) } }, 'under the cap');
  docsResolved = 0;
  const aliases = `{ ${Array.from({ length: 8 }, (_, i) => `b${i}: blob(bytes: 4000)`).join(' ')} }`;
  const res = await run(aliases);
  t.same(res, { errors: [{ message: 'answer exceeds the limit of 10000 bytes; ask for fewer items or fields', extensions: { code: 'BAD_REQUEST', retryable: false, requestId: 'req' } }] },
    'one error, no partial data');
  t.equal(docsResolved, 8);
  const strings = await run('{ a: text(chars: 6000) b: text(chars: 6000) }');
  t.match(strings.errors, [{ message: 'answer exceeds the limit of 10000 bytes; ask for fewer items or fields' }], 'whatever field carries the bytes');
  const withErrors = await run(`{ ok: text(chars: 10) ${Array.from({ length: 90 }, (_, i) => `e${i}: blob(bytes: -1)`).join(' ')} }`, undefined, executor({ maxComplexity: 1000 }));
  t.match(withErrors.errors, [{ message: 'answer exceeds the limit of 10000 bytes; ask for fewer items or fields' }], 'errors count too');
  t.same((await run('{ a: text(chars: 3000) b: text(chars: 3000) }')).data.a.length, 3000);
  // Multi-byte answers count in UTF-8 bytes: 3,400 '€' are 10,200 bytes.
  const wide = createGraphqlExecutor(buildSchema([baseGraphqlModule(), {
    name: 'wide', sdl: 'extend type Query { euros(n: Int!): String }', resolvers: { Query: { euros: (_: unknown, a: { n: number }) => '€'.repeat(a.n) } },
  }]), BASE, testLogger());
  t.match((await run('{ euros(n: 3400) }', undefined, wide)).errors, [{ message: 'answer exceeds the limit of 10000 bytes; ask for fewer items or fields' }]);
  t.equal((await run('{ euros(n: 3000) }', undefined, wide)).data.euros.length, 3000);
});
