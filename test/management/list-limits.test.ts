// Issue 21 point 7: list queries refuse a negative limit or offset with a message naming it, as the
// message reader does ('limit' must be an integer from 1 to ...), instead of quietly serving another page.
import t from 'tap';
import { adminToken, AUTH_ENV } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';

t.test('a negative limit or offset is BAD_REQUEST on every list', async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  const admin = await adminToken(ts);
  const lists = [
    'tenants', 'entities', 'resources', 'groups', 'roles', 'roleAssignments', 'directPolicies', 'permissionBlocks',
    'actions', 'actionAssignmentRules', 'auditLogs', 'accessTokens', 'profiles',
  ];
  for (const list of lists) {
    for (const [arg, value] of [['limit', -1], ['offset', -5]] as const) {
      const res = await gql(ts.url(), `query ($v: Int) { ${list}(${arg}: $v) { total } }`, { v: value }, admin);
      t.match(res.body.errors, [{ message: `${arg} must not be negative`, extensions: { code: 'BAD_REQUEST' } }], `${list}(${arg}: ${value})`);
    }
    const ok = await gql(ts.url(), `query { ${list}(limit: 0, offset: 0) { total } }`, undefined, admin);
    t.same(ok.body.errors, undefined, `${list}: zero is still a page (limit clamped to 1)`);
  }
});
