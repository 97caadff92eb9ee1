import t from 'tap';
import { AppError, graphqlExtensions, isAppError, rateLimited, toAppError } from '../../src/errors.js';

t.test('database errors translate by SQLSTATE and constraint name', async (t) => {
  const unique = toAppError({ code: '23505', constraint_name: 'tenants__alias_live', severity: 'ERROR' });
  t.equal(unique.kind, 'CONFLICT');
  t.equal(unique.message, 'a tenant with this alias already exists');
  t.equal(unique.status, 409);
  const unnamed = toAppError({ code: '23505', constraint_name: 'x__y', severity: 'ERROR' });
  t.equal(unnamed.message, 'already exists');
  t.equal(toAppError({ code: '23503', severity: 'ERROR' }).message, 'invalid reference');
  t.equal(toAppError({ code: '23514', severity: 'ERROR' }).message, 'invalid value');
  t.same([toAppError({ code: '22021', severity: 'ERROR' }).kind, toAppError({ code: '22021', severity: 'ERROR' }).message], ['INVALID_INPUT', 'text must not contain NUL characters']);
  t.same([toAppError({ code: '22001', severity: 'ERROR' }).kind, toAppError({ code: '22001', severity: 'ERROR' }).message], ['INVALID_INPUT', 'value too long']);
  t.equal(toAppError({ code: 'ECONNREFUSED' }).kind, 'UNAVAILABLE');
  t.equal(toAppError({ code: '57P01', severity: 'FATAL' }).kind, 'UNAVAILABLE');
  // 57014: a statement timeout (retrying the same query will not help) or a cancel request (it may).
  const timedOut = toAppError({ code: '57014', severity: 'ERROR', message: 'canceling statement due to statement timeout' });
  t.same([timedOut.kind, timedOut.message, timedOut.retryAfterSeconds], ['UNAVAILABLE', 'query cancelled: it ran longer than the statement timeout allows', undefined]);
  const cancelled = toAppError({ code: '57014', severity: 'ERROR', message: 'canceling statement due to user request' });
  t.same([cancelled.kind, cancelled.message, cancelled.retryAfterSeconds], ['UNAVAILABLE', 'query cancelled before it finished; retry', 1]);
  t.equal(toAppError({ code: '42P01', severity: 'ERROR', message: 'relation "x" does not exist' }).message, 'database error');
});

t.test('unknown errors become INTERNAL without their message', async (t) => {
  const err = toAppError(new Error('secret internals at /srv/app'));
  t.equal(err.kind, 'INTERNAL');
  t.equal(err.message, 'internal error');
  t.equal(err.status, 500);
});

t.test('errors are matched by shape, not instanceof', async (t) => {
  const plain = { name: 'AppError', kind: 'FORBIDDEN', code: 'FORBIDDEN', message: 'forbidden' };
  t.ok(isAppError(plain));
  t.notOk(isAppError({ name: 'AppError', kind: 'NOPE' }));
});

t.test('GraphQL extensions follow the contract', async (t) => {
  t.same(graphqlExtensions(rateLimited(3), 'r1'), { code: 'RATE_LIMITED', retryable: true, requestId: 'r1', retryAfterSeconds: 3 });
  const guard = new AppError('INVALID_INPUT', 'no', { code: 'action_not_allowed_for_entity_kind' });
  t.same(graphqlExtensions(guard, 'r2'), { code: 'action_not_allowed_for_entity_kind', retryable: false, requestId: 'r2' });
});
