// The secret plan of an operation, on a schema of its own: secret positions reached through aliases,
// fragments (named and inline, on interfaces), lists, input literals, typed input variables (input types
// that refer to each other in a cycle included), header targets and responseMapping paths.
import { buildSchema } from 'graphql';
import t from 'tap';
import { compileResponse, compileVariables } from '../../src/custom-endpoints/mapping.js';
import { REDACTED } from '../../src/custom-endpoints/redaction.js';
import { planSecrets, redactResponse, redactVariables } from '../../src/custom-endpoints/secrets.js';
import { inputHoldsSecret } from '../../src/graphql/secret.js';

const schema = buildSchema(`
  directive @secret on FIELD_DEFINITION | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION
  input Outer { inner: Inner, name: String }
  input Inner { outer: Outer, pin: String @secret }
  input Plain { a: String, b: [Plain] }
  input Loop { next: Back, key: String @secret }
  input Back { loop: Loop }
  interface Holder { id: ID!, code: String @secret }
  type Box implements Holder { id: ID!, code: String @secret, note: String }
  type Item { id: ID!, holder: Holder, items: [Item] }
  type Query {
    item(id: ID!, pin: String @secret): Item
    list(filter: Outer, plain: Plain): [Item]
  }
`);

const plan = (graphql: string, variablesMapping: Record<string, unknown> = {}, responseMapping: Record<string, unknown> = {}) =>
  planSecrets(schema, graphql, true, compileVariables(variablesMapping), compileResponse(responseMapping));

t.test('input types holding secrets, through a cycle', async (t) => {
  t.equal(inputHoldsSecret(schema.getType('Outer') as never), true, 'Outer holds Inner.pin');
  t.equal(inputHoldsSecret(schema.getType('Inner') as never), true);
  t.equal(inputHoldsSecret(schema.getType('Plain') as never), false);
  // Asked first about Loop: Back is met while Loop is still being worked out, and must not be settled as clear.
  t.equal(inputHoldsSecret(schema.getType('Loop') as never), true);
  t.equal(inputHoldsSecret(schema.getType('Back') as never), true, 'Back holds Loop.key');
});

t.test('variables: a secret argument, a secret field in a literal, a typed variable, a header target', async (t) => {
  const p = plan(`query ($x: String, $id: ID!, $f: Outer, $n: String, $y: String, $pl: Plain) {
    a: item(id: $id, pin: $x) { id }
    list(filter: {inner: {pin: $y, outer: {name: $n}}}, plain: $pl) { id }
    again: list(filter: $f) { id }
  }`, { id: '$body.id', x: '$body.x', f: '$body.f', n: '$headers.x-name', y: '$body.y', pl: '$body.pl' });
  t.same([...p.whole].sort(), ['x', 'y']);
  t.same([...p.typed.keys()], ['f']);
  const variables = {
    id: '1', x: 's1', y: 's2', n: 'header-value', pl: { a: 'kept', b: [{ a: 'kept too' }] },
    f: { name: 'n', inner: { pin: 's3', outer: { inner: { pin: 's4' } } } },
  };
  t.same(redactVariables(p, variables), {
    id: '1', x: REDACTED, y: REDACTED, n: REDACTED, pl: { a: 'kept', b: [{ a: 'kept too' }] },
    f: { name: 'n', inner: { pin: REDACTED, outer: { inner: { pin: REDACTED } } } },
  });
  t.equal(variables.f.inner.pin, 's3', 'the original is not changed');
  const listOf = plan('query ($f: [Outer]) { list(filter: {name: "x"}) { id } }');
  t.same([...listOf.typed.keys()], ['f']);
  t.same(redactVariables(listOf, { f: [{ inner: { pin: 's5' } }, null] }), { f: [{ inner: { pin: REDACTED } }, null] }, 'lists of inputs');
});

t.test('answers: aliases, named and inline fragments on an interface, lists, responseMapping paths', async (t) => {
  const graphql = `query {
    item(id: "1") { holder { ... on Box { secretCode: code note } } items { ...F } }
    list { holder { id c: code } }
  }
  fragment F on Item { holder { code } }`;
  const data = {
    item: { holder: { secretCode: 's1', note: 'kept' }, items: [{ holder: { code: 's2' } }, { holder: null }] },
    list: [{ holder: { id: 'h', c: 's3' } }, { holder: { id: 'h2', c: null } }],
  };
  t.same(redactResponse(plan(graphql), data, true), {
    item: { holder: { secretCode: REDACTED, note: 'kept' }, items: [{ holder: { code: REDACTED } }, { holder: null }] },
    list: [{ holder: { id: 'h', c: REDACTED } }, { holder: { id: 'h2', c: null } }],
  }, 'a null stays null');
  const mapped = plan(graphql, {}, { a: '$.item.holder.secretCode', b: '$.list.0.holder', c: '$.item.holder.note', d: 'literal', e: '$.list' });
  t.same(redactResponse(mapped, { a: 's1', b: { id: 'h', c: 's3' }, c: 'kept', d: 'literal', e: [{ holder: { id: 'h', c: 's3' } }] }, true),
    { a: REDACTED, b: { id: 'h', c: REDACTED }, c: 'kept', d: 'literal', e: [{ holder: { id: 'h', c: REDACTED } }] });
  t.equal(plan('query { item(id: "1") { id } }').response, null, 'nothing secret asked: nothing to walk');
});

t.test('errors quoting a variable value, an operation that does not validate', async (t) => {
  const p = plan('query ($x: String) { item(id: "1", pin: $x) { id } }');
  const errors = { errors: [{ message: 'Variable "$x" got invalid value 12345; String cannot represent a non string value: 12345' }, { message: 'other' }] };
  t.same(redactResponse(p, errors, false), { errors: [{ message: `Variable "$x" got invalid value ${REDACTED}` }, { message: 'other' }] });
  const clear = plan('query ($id: ID!) { item(id: $id) { id } }');
  t.equal(redactResponse(clear, errors, false), errors, 'nothing secret among the variables: errors kept as they are');
  const invalid = planSecrets(schema, 'query ($a: String) { nope(a: $a) }', false, compileVariables({}), compileResponse({}));
  t.same(redactVariables(invalid, { a: 'v', b: 2 }), { a: REDACTED, b: REDACTED });
});
