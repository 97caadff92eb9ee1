// Issue 21 point 2: the document bounds are checked in time linear in the document, before any rule
// expands a fragment. The probe's documents (fragments that each spread the previous twice; a chain of
// 10,000 fragments; thousands of nested braces; a JSON variable nested thousands deep) are refused
// with BAD_REQUEST, and the check measures each fragment once: counted here, never timed.
import { parse } from 'graphql';
import t from 'tap';
import { baseGraphqlModule } from '../../src/graphql/base-module.js';
import { contextFor } from '../../src/graphql/context.js';
import { createGraphqlExecutor } from '../../src/graphql/executor.js';
import { checkDocument, jsonNesting, scanQueryText } from '../../src/graphql/limits.js';
import { buildSchema } from '../../src/graphql/schema.js';
import { adminToken, AUTH_ENV } from '../helpers/auth.js';
import { gql, startTestService, testLogger } from '../helpers/service.js';

const LIMITS = { maxDepth: 20, maxComplexity: 1000, maxTokens: 10_000, maxNesting: 64, maxFragments: 100, maxAliases: 100 };
const PAGES = { maxPageSize: 100, jsonFieldCost: 10, answerMaxBytes: 16_777_216 };

/** F<n> spreads F<n-1> twice: 2^n fields once expanded, in under 1.5 KB at n = 30. */
function doubling(n: number): string {
  let s = `query { ...F${n} }\nfragment F0 on Query { __typename }\n`;
  for (let i = 1; i <= n; i++) s += `fragment F${i} on Query { ...F${i - 1} ...F${i - 1} }\n`;
  return s;
}

/** F<n> spreads F<n-1> once: 10,000 of them make the probe's 478 KB document. */
function chain(n: number): string {
  let s = `query { ...F${n} }\nfragment F0 on Query { __typename }\n`;
  for (let i = 1; i <= n; i++) s += `fragment F${i} on Query { ...F${i - 1} }\n`;
  return s;
}

t.test('each fragment is measured once, however often it is spread', async (t) => {
  const doubled = checkDocument(parse(doubling(30)), LIMITS);
  t.equal(doubled.fragmentVisits, 31, 'F0..F30, once each (expanding would visit 2^31 - 1 spreads)');
  t.match(doubled.errors.map((e) => e.message), ['query complexity 1073741824 exceeds the maximum of 1000']);

  const long = chain(10_000);
  const unbounded = { ...LIMITS, maxFragments: 20_000 };
  const chained = checkDocument(parse(long, { maxTokens: 1_000_000 }), unbounded);
  t.equal(chained.fragmentVisits, 10_001, 'a chain of 10,000 is walked without recursion, once per fragment');
  t.same(chained.errors, [], 'its cost is 1 and its depth 1');
  t.equal(checkDocument(parse(long, { maxTokens: 1_000_000 }), LIMITS).fragmentVisits, 0, 'over the fragment bound: refused before measuring any');

  const huge = checkDocument(parse(doubling(2000), { maxTokens: 1_000_000 }), { ...unbounded, maxDepth: 10_000 });
  t.equal(huge.fragmentVisits, 2001);
  t.match(huge.errors.map((e) => e.message), ['query complexity exceeds the maximum of 1000'], 'a cost past 2^53 is not printed');
});

t.test('fragment cycles, fragments, aliases, tokens and nesting are bounded before expansion', async (t) => {
  const cycle = checkDocument(parse('{ ...A } fragment A on Query { ...B } fragment B on Query { __typename ...A }'), LIMITS);
  t.match(cycle.errors.map((e) => e.message), ['fragment cycle: A -> B -> A']);
  const selfSpread = checkDocument(parse('{ ...A } fragment A on Query { ... on Query { ...A } }'), LIMITS);
  t.match(selfSpread.errors.map((e) => e.message), ['fragment cycle: A -> A']);
  const many = `{ ...F0 } ${Array.from({ length: 101 }, (_, i) => `fragment F${i} on Query { __typename }`).join(' ')}`;
  t.match(checkDocument(parse(many), LIMITS).errors.map((e) => e.message), ['query defines 101 fragments; the maximum is 100']);
  const aliased = `{ ${Array.from({ length: 101 }, (_, i) => `a${i}: __typename`).join(' ')} }`;
  t.match(checkDocument(parse(aliased), LIMITS).errors.map((e) => e.message), ['query uses 101 aliases; the maximum is 100']);
  t.match(scanQueryText(`{ ${'__typename '.repeat(10_000)}}`, LIMITS)?.message, 'query has more than 10000 tokens');
  t.match(scanQueryText(`${'{a'.repeat(65)}${'}'.repeat(65)}`, LIMITS)?.message, 'query nests brackets deeper than 64 levels');
  t.equal(scanQueryText(`${'{a'.repeat(64)}${'}'.repeat(64)}`, LIMITS), null, '64 levels pass the lexer (the depth bound judges them)');
  t.match(scanQueryText('{ a(x: [[[[1]]]]) }', { maxTokens: 100, maxNesting: 5 })?.message, 'deeper than 5', 'lists and argument parentheses count too');
  t.match(scanQueryText('{ "unterminated }', LIMITS)?.message, 'Syntax Error', 'lexing errors are syntax errors');
  t.equal(jsonNesting({ a: [{ b: 1 }] }, 64), 3);
  t.equal(jsonNesting(JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`), 64), 65, 'counting stops past the bound');
});

t.test('the compiled-query cache keeps no lexer refusals, and a bounded amount of text', async (t) => {
  const ex = createGraphqlExecutor(buildSchema([baseGraphqlModule()]), { ...LIMITS, ...PAGES, introspection: false, cacheSize: 1000 }, testLogger());
  const run = async (query: string) => JSON.parse(await ex.execute({ query }, contextFor(null, 'r')));
  for (let i = 0; i < 5; i++) t.match((await run(`# ${i}\n${chain(10_000)}`)).errors[0].message, 'more than 10000 tokens');
  t.equal(ex.stats.cached, 0, 'five distinct 378 KB refusals: nothing kept');
  // Valid documents padded with a 1 MB comment: each is compiled, but at most 8 M characters are kept.
  for (let i = 0; i < 12; i++) t.same((await run(`{ __typename } # ${i} ${'x'.repeat(1 << 20)}`)).data, { __typename: 'Query' });
  t.ok(ex.stats.cached <= 8, `${ex.stats.cached} of 12 one-megabyte texts kept`);
});

t.test('over HTTP, anonymously: the probe documents answer BAD_REQUEST, never INTERNAL or a stack overflow', async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  // Bodies are written as text: the client's own JSON.stringify would overflow on the deep variable.
  const post = async (body: string, token?: string) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`${ts.url()}/graphql`, { method: 'POST', headers, body });
    return { status: res.status, body: (await res.json()) as { data?: Record<string, any>; errors?: any[] } };
  };
  const refused = async (what: string, query: string, variablesText = 'null', token?: string) => {
    const res = await post(`{"query": ${JSON.stringify(query)}, "variables": ${variablesText}}`, token);
    t.equal(res.status, 200, `${what}: HTTP 200 per the error contract`);
    t.equal(res.body.errors?.[0]?.extensions?.code, 'BAD_REQUEST', `${what}: ${res.body.errors?.[0]?.message}`);
    return res.body.errors?.[0]?.message as string;
  };
  t.match(await refused('doubling at depth 30', doubling(30)), 'query complexity 1073741824 exceeds the maximum of 1000');
  t.match(await refused('chain of 10,000 fragments', chain(10_000)), 'query has more than 10000 tokens');
  t.match(await refused('a chain of 101 fragments (under the token bound)', chain(100)), 'query defines 101 fragments; the maximum is 100');
  t.match(await refused('braces nested 5,000 deep', `${'{a'.repeat(5000)}${'}'.repeat(5000)}`), 'query nests brackets deeper than 64 levels');
  t.match(await refused('a literal list nested 3,000 deep', `{ health(x: ${'['.repeat(3000)}${']'.repeat(3000)}) }`), 'nests brackets deeper');
  const deep = `{"v": ${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
  const admin = await adminToken(ts);
  t.match(await refused('a JSON variable nested 5,000 deep', 'query ($v: JSON) { entities(attributesContains: $v) { total } }', deep, admin),
    "variable 'v' nests deeper than 64 levels");
  const ok = await gql(ts.url(), 'query ($v: JSON) { entities(attributesContains: $v) { total } }', { v: { a: { b: [1, { c: 2 }] } } }, admin);
  t.same(ok.body.errors, undefined, 'ordinary nesting is answered');
  t.equal((await gql(ts.url(), '{ health }')).body.data?.health, 'ok', 'still serving');
});
