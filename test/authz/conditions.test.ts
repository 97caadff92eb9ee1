// Conditions at write time (validateConditions names what is wrong) and the pure evaluation rules that
// the data-driven cases exercise end to end: missing fields, null, types, every operator.
import t from 'tap';
import { compileConditions, conditionsHold, firstFailure, validateConditions, type ConditionInput } from '../../src/authz/conditions.js';

const input: ConditionInput = {
  entity: { id: 'e1', kind: 'device', tenant_id: null, status: 'active', attributes: { site: 'north', fw: 3, tags: ['a', 'b'], nested: { team: 'x' } } },
  object: { id: 'o1', kind: 'resource', type: 'resource:channel', tenant_id: 't1', attributes: { zone: 'a' } },
  resource: { id: 'o1', kind: 'channel', tenant_id: 't1', attributes: { zone: 'a' } },
  tenant: { id: 't1', status: 'active', attributes: {} },
  context: { ip: '10.0.0.1', mfa_verified: true, time: '2025-01-01T00:00:00Z' },
};
const holds = (c: Record<string, unknown>) => conditionsHold(compileConditions(c)!, input);

t.test('validation names the problem', async (t) => {
  t.same(validateConditions(undefined), {});
  t.throws(() => validateConditions([1]), { message: 'conditions must be a JSON object' });
  t.throws(() => validateConditions({ 'entity.password': 'x' }), { message: "conditions: 'entity.password' is not a referencable field" });
  t.throws(() => validateConditions({ 'context.user_agent': 'x' }), { message: "conditions: 'context.user_agent' is not a referencable field" });
  t.throws(() => validateConditions({ 'entity.attributes.': 'x' }), { message: /not a referencable field/ });
  t.throws(() => validateConditions({ 'entity.kind': { like: 'dev%' } }), { message: "conditions: 'entity.kind' uses unknown operator(s) 'like'; expected one of eq, neq, contains, in, gt, gte, lt, lte" });
  t.throws(() => validateConditions({ 'entity.kind': { in: 'device' } }), { message: "conditions: 'entity.kind' operator 'in' needs an array" });
  t.throws(() => validateConditions({ 'entity.attributes.fw': { gt: true } }), { message: "conditions: 'entity.attributes.fw' operator 'gt' needs a number or a string" });
  t.same(validateConditions({ 'entity.attributes.fw': { gte: 2, lt: 5 }, 'object.type': 'resource:channel', 'context.mfa_verified': true }),
    { 'entity.attributes.fw': { gte: 2, lt: 5 }, 'object.type': 'resource:channel', 'context.mfa_verified': true });
});

t.test('evaluation', async (t) => {
  t.equal(compileConditions({}), null, 'no conditions compile to nothing');
  t.ok(holds({ 'entity.attributes.site': 'north', 'resource.kind': 'channel' }), 'literals are eq; all must hold');
  t.notOk(holds({ 'entity.attributes.site': 'north', 'resource.kind': 'rule' }));
  t.ok(holds({ 'entity.attributes.fw': { gte: 2, lt: 5 } }), 'several operators on one field all apply');
  t.notOk(holds({ 'entity.attributes.fw': { gte: 2, lt: 3 } }));
  t.notOk(holds({ 'entity.attributes.missing': { neq: 'x' } }), 'a missing field never matches, neq included');
  t.ok(holds({ 'entity.tenant_id': null }), 'null is a present value');
  t.ok(holds({ 'entity.attributes.nested.team': 'x' }), 'nested attribute paths');
  t.notOk(holds({ 'entity.attributes.site.deeper': 'x' }), 'a path through a scalar is missing');
  t.ok(holds({ 'entity.attributes.tags': { contains: 'b' } }));
  t.ok(holds({ 'entity.attributes.site': { contains: 'nor' } }));
  t.notOk(holds({ 'entity.attributes.fw': { contains: 3 } }), 'contains needs a string or an array');
  t.ok(holds({ 'entity.attributes.tags': ['a', 'b'] }), 'arrays compare by value');
  t.notOk(holds({ 'entity.attributes.fw': { gt: '2' } }), 'no type coercion');
  t.ok(holds({ 'context.time': { lt: '2030-01-01T00:00:00Z' } }), 'ISO timestamps order as strings');
  t.ok(compileConditions({ 'context.ip': '10.0.0.1' })!.usesContext);
  t.notOk(conditionsHold(compileConditions({ 'context.ip': '10.0.0.1' })!, { ...input, context: undefined }), 'no context, no match');
  t.notOk(holds({ 'secret.thing': 'x' }), 'stored keys nobody may reference never hold');
  t.equal(firstFailure(compileConditions({ 'entity.attributes.fw': { gt: 5 } })!, input), "condition 'entity.attributes.fw' (gt 5) failed: value is 3");
  t.equal(firstFailure(compileConditions({ 'context.client_id': 'c' })!, input), "condition 'context.client_id' (eq \"c\") failed: field is missing");
});
