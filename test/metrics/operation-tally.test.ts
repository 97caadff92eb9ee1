// The bound on GraphQL operation names in the metrics: anonymous and empty names share one, names past
// the cap or too long share "other", and a name already counted keeps its own series.
import t from 'tap';
import { createOperationTally } from '../../src/graphql/operation-tally.js';

t.test('names are bounded', async (t) => {
  const tally = createOperationTally(3);
  t.equal(tally.slot(undefined, 'query').name, 'anonymous');
  t.equal(tally.slot('', 'query'), tally.slot(undefined, 'query'), 'empty and missing share the anonymous slot');
  for (const n of ['A', 'B', 'C']) t.equal(tally.slot(n, 'query').name, n);
  t.equal(tally.slot('D', 'query').name, 'other', 'past the cap');
  t.equal(tally.slot('E', 'mutation').name, 'other');
  t.equal(tally.slot('A', 'mutation').name, 'A', 'a counted name keeps its own series for another type');
  t.equal(tally.slot('x'.repeat(65), 'query').name, 'other', 'a long name');
  t.equal(createOperationTally().slot('Q_1b4e28ba_2fa1_11d2_883f_0016d3cca427', 'query').name, 'other', 'a name carrying a UUID');
  t.equal(createOperationTally().slot('Device0123abcd', 'query').name, 'other', 'a name carrying a hex run');
  t.equal(createOperationTally().slot('Report2024', 'query').name, 'Report2024', 'a short number is a word, not an id');
  t.equal(createOperationTally().slot('DeadBeefFacade', 'query').name, 'DeadBeefFacade', 'hex letters without a digit are words');
  t.equal(tally.slot('D', 'query'), tally.slot('F', 'query'), 'every name past the cap shares one slot');
  t.equal(new Set(tally.slots.map((s) => s.name)).size, 5, 'anonymous, A, B, C, other');
});

t.test('slots count without allocation: the same object every time', async (t) => {
  const tally = createOperationTally();
  const s = tally.slot('Q', 'query');
  s.ok++;
  s.ok++;
  s.error++;
  t.equal(tally.slot('Q', 'query'), s);
  t.match(tally.slots, [{ name: 'Q', type: 'query', ok: 2, error: 1 }]);
});
