// One runner over the authorization cases in fixtures/cases.ts: each case is decided with an empty
// decision memo, again from the memo, and without it; all three must agree with the expectation.
import t from 'tap';
import type { AuthorizeRequest, Decision } from '../../src/authz/types.js';
import { cases, type Case } from './fixtures/cases.js';
import { world } from './fixtures/world.js';
import { resolveObject, startEngine } from './helpers/engine.js';

function describe(c: Case): string {
  const obj = JSON.stringify(c.object).replace(/"/g, '');
  return `${c.subject} ${c.action} ${obj}${c.ceiling ? ` via ${c.ceiling}` : ''}${c.frozenRead ? ' (frozen read)' : ''}${c.context ? ` ctx ${JSON.stringify(c.context)}` : ''} -> ${c.expect}: ${c.reason}`;
}

t.test('authorization cases', async (t) => {
  const { authz, ids } = await startEngine(t, world);
  const name = (n: string) => ids[n] ?? n;
  t.ok(cases.length >= 80, `${cases.length} cases`);

  for (const c of cases) {
    const request: AuthorizeRequest = {
      subjectId: name(c.subject),
      action: c.action,
      object: resolveObject(c.object, ids),
      context: c.context,
      ceilingCredentialId: c.ceiling ? name(c.ceiling) : null,
      readingFrozenTenant: c.frozenRead,
    };
    await t.test(describe(c), async (t) => {
      if (c.expect === 'error') {
        for (const run of [() => authz.authorize(request), () => authz.engine.authorizeUncached(request)]) {
          await t.rejects(run(), { kind: 'INVALID_INPUT', message: c.reason });
        }
        return;
      }
      const first = await authz.authorize(request);
      const second = await authz.authorize(request);
      const uncached = await authz.engine.authorizeUncached(request);
      for (const [label, d] of [['first', first], ['memoised', second], ['uncached', uncached]] as [string, Decision][]) {
        t.equal(d.allowed, c.expect === 'allow', `${label}: allowed`);
        t.equal(d.reason, c.reason, `${label}: reason`);
        if (c.blocks) t.same([...d.blockIds].sort(), c.blocks.map(name).sort(), `${label}: deciding blocks`);
        if (c.details) t.match(d.details, Object.fromEntries(Object.entries(c.details).map(([k, v]) => [k, name(v)])), `${label}: details`);
      }
      if (c.expect === 'allow') t.ok(first.blockIds.length > 0, 'an allow names the blocks that allowed');
    });
  }
});
