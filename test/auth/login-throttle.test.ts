// Issue 21 point 6: login throttling that does not lock out the innocent. Failures are counted per
// (identity, address), per identity and per address (src/auth/login-throttle.ts): other clients behind
// the administrator's address no longer lock the administrator out, a guesser is slowed by delays that
// double, a burst sent at once gets one try per free slot, and refusals are 429 with Retry-After.
// Clients are told apart by X-Forwarded-For from a trusted proxy (the test client is that proxy). Delays
// are steered by moving a counter's last failure back in PostgreSQL, never by sleeping.
import t from 'tap';
import { releaseAt } from '../../src/auth/login-throttle.js';
import { ADMIN_SECRET, startAuthService } from '../helpers/auth.js';
import type { TestService } from '../helpers/service.js';

const PROXY = { SVC_TRUSTED_PROXY_CIDRS: '127.0.0.1/32,::1/128' };

async function login(ts: TestService, from: string, identifier: string, secret: string, via: 'graphql' | 'rest' = 'graphql') {
  const headers = { 'content-type': 'application/json', 'x-forwarded-for': from };
  if (via === 'rest') {
    const res = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers, body: JSON.stringify({ identifier, secret }) });
    const body = (await res.json()) as { token?: string; error?: string };
    return { ok: res.ok, status: res.status, message: body.error, retryAfter: Number(res.headers.get('retry-after') ?? NaN) };
  }
  const res = await fetch(`${ts.url()}/graphql`, {
    method: 'POST', headers,
    body: JSON.stringify({ query: 'mutation ($i: LoginInput!) { login(input: $i) { token } }', variables: { i: { identifier, secret } } }),
  });
  const body = (await res.json()) as { data?: { login: { token: string } }; errors?: { message: string; extensions: { code: string; retryAfterSeconds?: number } }[] };
  const error = body.errors?.[0];
  return { ok: Boolean(body.data?.login?.token), status: res.status, message: error?.message, code: error?.extensions.code, retryAfter: error?.extensions.retryAfterSeconds };
}

t.test('the policy: doubling delays past a limit, a ceiling until the window ends, nothing past the window', async (t) => {
  const at = (failures: number, lastFailedMs = 100_000) => ({ failures, windowStartedMs: 0, lastFailedMs });
  t.equal(releaseAt(at(4), 5, 'delay', 900), null, 'under the limit: nothing held back');
  t.equal(releaseAt(at(5), 5, 'delay', 900), 101_000, 'at the limit: 1 s after the last failure');
  t.equal(releaseAt(at(8), 5, 'delay', 900), 108_000, 'three more: 8 s');
  t.equal(releaseAt(at(30), 5, 'delay', 900), 900_000, 'never past the window');
  t.equal(releaseAt(at(1000), 5, 'delay', 900), 900_000, 'however many failures');
  t.equal(releaseAt(at(1000), 1000, 'ceiling', 900), 900_000, 'a ceiling holds until the window ends');
});

t.test('other clients behind the administrator\'s address do not lock the administrator out', async (t) => {
  const ts = await startAuthService(t, PROXY);
  // The probe's case: 120 failures of other users behind one NAT address (the old ceiling was 100).
  for (let i = 0; i < 120; i++) {
    t.equal((await login(ts, '198.51.100.7', `user${i}@example.com`, 'a wrong password')).message, 'invalid credentials');
  }
  t.ok((await login(ts, '198.51.100.7', 'admin', ADMIN_SECRET)).ok, "the administrator's right password is let in");
});

t.test('one identity from one address: delays that double; elsewhere the identity is not held back', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '3', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '10' });
  const sql = ts.service.sql;
  for (let i = 0; i < 3; i++) t.equal((await login(ts, '203.0.113.1', 'admin', `wrong-${i}`)).message, 'invalid credentials');
  // Seven failures past the limit at the last one: a 128 s delay (moved on the counter, not waited for).
  await sql`update auth_login_failures set failures = 10, last_failed_at = now() where key like 'pair:%'`;
  const held = await login(ts, '203.0.113.1', 'admin', ADMIN_SECRET);
  t.match(held, { ok: false, status: 200, code: 'RATE_LIMITED', message: 'too many failed login attempts' }, 'even the right password waits');
  t.ok(held.retryAfter! > 120 && held.retryAfter! <= 128, `retryAfterSeconds ${held.retryAfter}`);
  const rest = await login(ts, '203.0.113.1', 'admin', ADMIN_SECRET, 'rest');
  t.match(rest, { ok: false, status: 429, message: 'too many failed login attempts' }, 'REST: 429');
  t.ok(rest.retryAfter! > 120 && rest.retryAfter! <= 128, `with Retry-After ${rest.retryAfter}`);
  t.ok((await login(ts, '203.0.113.2', 'admin', ADMIN_SECRET)).ok, 'the same identity from another address is let in');

  // The delay is over: one more try, and a wrong one doubles the next wait.
  await sql`update auth_login_failures set last_failed_at = now() - interval '10 minutes' where key like 'pair:%'`;
  t.equal((await login(ts, '203.0.113.1', 'admin', 'wrong-again')).message, 'invalid credentials');
  const doubled = await login(ts, '203.0.113.1', 'admin', ADMIN_SECRET);
  t.ok(doubled.retryAfter! > 248 && doubled.retryAfter! <= 256, `doubled: ${doubled.retryAfter} s`);
  await sql`update auth_login_failures set last_failed_at = now() - interval '10 minutes' where key like 'pair:%'`;
  t.ok((await login(ts, '203.0.113.1', 'admin', ADMIN_SECRET)).ok, 'the right password once the wait is over');
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from auth_login_failures where key like 'pair:%' or key like 'id:%'`;
  t.equal(n, 0, "a success clears the identity's counters");

  await ts.service.audit.flush();
  const [{ limited }] = await sql<[{ limited: number }]>`select count(*)::int as limited from audit_log where event = 'auth.login' and details->>'reason' = 'rate_limited'`;
  t.equal(limited, 3, 'every held-back attempt is audited');
});

t.test('one identity from many addresses: delays for all past the identity limit', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '3', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '5' });
  for (let i = 0; i < 5; i++) t.equal((await login(ts, `192.0.2.${10 + i}`, 'admin', `wrong-${i}`)).message, 'invalid credentials');
  await ts.service.sql`update auth_login_failures set failures = 9, last_failed_at = now() where key like 'id:%'`;
  const held = await login(ts, '192.0.2.99', 'admin', ADMIN_SECRET);
  t.match(held, { code: 'RATE_LIMITED' }, 'a fresh address waits too');
  t.ok(held.retryAfter! > 8 && held.retryAfter! <= 16, `for the identity's delay: ${held.retryAfter} s`);
  // Every spelling of the administrator counts on one identity: its id is not a way around.
  const [{ id }] = await ts.service.sql<[{ id: string }]>`select id from entities where name = 'admin'`;
  t.match(await login(ts, '192.0.2.98', id, ADMIN_SECRET), { code: 'RATE_LIMITED' }, 'by id as by name');
  t.equal((await login(ts, '192.0.2.99', 'someone-else', 'a wrong password')).message, 'invalid credentials', 'other identities are not held back');
});

t.test('one address, every identity: a ceiling until the window ends', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_IP_LIMIT: '4' });
  for (let i = 0; i < 4; i++) await login(ts, '198.51.100.50', `u${i}@example.com`, 'a wrong password');
  const held = await login(ts, '198.51.100.50', 'admin', ADMIN_SECRET);
  t.match(held, { code: 'RATE_LIMITED', message: 'too many failed login attempts' });
  t.ok(held.retryAfter! > 800, `until the window ends: ${held.retryAfter} s`);
  t.ok((await login(ts, '198.51.100.51', 'admin', ADMIN_SECRET)).ok, 'another address is not held back');
});

t.test('a burst of guesses sent at once gets the free tries, not one each', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '3' });
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => login(ts, '203.0.113.77', 'admin', `guess-${i}`)));
  const tried = answers.filter((a) => a.message === 'invalid credentials').length;
  const held = answers.filter((a) => a.code === 'RATE_LIMITED').length;
  t.equal(tried + held, 20);
  // Three free tries, and at most one more if a 1-second delay ran out while the burst was being served.
  t.ok(tried >= 3 && tried <= 4, `${tried} guesses were checked, ${held} held back`);
});
