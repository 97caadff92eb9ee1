import t from 'tap';
import { ADMIN_ID, ADMIN_SECRET, startAuthService } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

t.test('REST login, session, introspect, sessions/:id and logout; the cookie needs a trusted origin on POST', async (t) => {
  const ts = await startAuthService(t, { SVC_PUBLIC_BASE_URL: 'https://iam.example.com', SVC_TRUSTED_ORIGINS: 'https://ui.example.com' });
  const bad = await post(`${ts.url()}/auth/login`, { identifier: 'admin', secret: 'wrong-password-here' });
  t.equal(bad.status, 401);
  t.same(await bad.json(), { error: 'invalid credentials' });
  t.equal((await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status, 415);
  t.equal((await post(`${ts.url()}/auth/login`, [])).status, 400);
  const latin1 = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.from('{"identifier":"admin","secret":"pass\xe9word"}', 'latin1') });
  t.equal(latin1.status, 400);
  t.same(await latin1.json(), { error: 'request body is not valid UTF-8' }, 'not read with U+FFFD in place of the bad byte');
  const lone = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"identifier":"admin","secret":"pass\\udc00word"}' });
  t.same(await lone.json(), { error: 'request body holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text' });

  const res = await post(`${ts.url()}/auth/login`, { identifier: 'admin', secret: ADMIN_SECRET });
  t.equal(res.status, 200);
  const body = await res.json() as Record<string, string>;
  t.match(body, { token: String, entity_id: ADMIN_ID, session_id: String, expires_at: String, access_token: body.token, access_token_expires_at: body.expires_at });
  const cookie = res.headers.get('set-cookie')!;
  t.match(cookie, /^svc_token=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=3600; Secure$/);
  const jar = cookie.split(';')[0]!;
  const bearer = { authorization: `Bearer ${body.token}` };

  t.same(await (await fetch(`${ts.url()}/auth/introspect`, { headers: bearer })).json(),
    { active: true, entity_id: ADMIN_ID, tenant_id: null, session_id: body.session_id, scoped: false });
  t.same(await (await fetch(`${ts.url()}/auth/introspect`, { headers: { authorization: 'Bearer nope' } })).json(), { active: false });
  t.equal((await fetch(`${ts.url()}/auth/introspect`)).status, 401);
  t.match(await (await fetch(`${ts.url()}/auth/session`, { headers: { cookie: jar } })).json(),
    { authenticated: true, session: { entityId: ADMIN_ID, sessionId: body.session_id, expiresAt: String } }, 'cookie on a safe method');
  t.same(await (await fetch(`${ts.url()}/auth/session`)).json(), { authenticated: false });
  t.match(await (await fetch(`${ts.url()}/auth/sessions/${body.session_id}`, { headers: bearer })).json(), { id: body.session_id, entity_id: ADMIN_ID, revoked_at: null });

  const q = { query: `query ($id: ID!) { session(id: $id) { id } }`, variables: { id: body.session_id } };
  const noOrigin = await (await post(`${ts.url()}/graphql`, q, { cookie: jar })).json() as { errors: { message: string }[] };
  t.equal(noOrigin.errors[0]!.message, 'missing authentication', 'a cookie without a trusted Origin is not used');
  const foreign = await (await post(`${ts.url()}/graphql`, q, { cookie: jar, origin: 'https://evil.example.net' })).json() as { errors: unknown[] };
  t.ok(foreign.errors, 'nor from a foreign origin');
  for (const origin of ['https://iam.example.com', 'https://ui.example.com']) {
    const ok = await (await post(`${ts.url()}/graphql`, q, { cookie: jar, origin })).json() as { data: { session: { id: string } } };
    t.equal(ok.data.session.id, body.session_id, `cookie accepted from ${origin}`);
  }

  const out = await post(`${ts.url()}/auth/logout`, {}, bearer);
  t.same(await out.json(), { authenticated: false });
  t.match(out.headers.get('set-cookie'), /svc_token=; .*Max-Age=0/);
  t.same(await (await fetch(`${ts.url()}/auth/introspect`, { headers: bearer })).json(), { active: false });
  const again = await post(`${ts.url()}/auth/logout`, {}, bearer);
  t.equal(again.status, 200, 'logging out with a dead token still clears the cookie');
  const gone = await gql(ts.url(), q.query, q.variables, body.token);
  t.equal(gone.body.errors?.[0].extensions.details.reason, 'revoked_token');
});

t.test('per-IP limits on auth routes answer 429 with Retry-After; login failures are limited per identifier', async (t) => {
  const ts = await startAuthService(t, {
    SVC_RATE_LIMIT_ENABLED: 'true', SVC_HTTP_RATE_LIMIT_AUTH_ROUTES: '3', SVC_HTTP_RATE_LIMIT_PUBLIC_ROUTES: '2', SVC_LOGIN_FAILURE_LIMIT: '3',
  });
  for (let i = 0; i < 3; i++) t.equal((await fetch(`${ts.url()}/auth/public-config`)).status, 200);
  const limited = await fetch(`${ts.url()}/auth/public-config`);
  t.equal(limited.status, 429);
  t.same(await limited.json(), { error: 'rate limit exceeded' });
  t.ok(Number(limited.headers.get('retry-after')) >= 1);
  t.equal((await post(`${ts.url()}/auth/login`, { identifier: 'admin', secret: ADMIN_SECRET })).status, 429, 'the category is shared by the auth routes');
  for (let i = 0; i < 2; i++) t.equal((await fetch(`${ts.url()}/.well-known/jwks.json`)).status, 200);
  t.equal((await fetch(`${ts.url()}/.well-known/jwks.json`)).status, 429, 'public routes have their own bucket');

  // Failed logins through GraphQL (not IP-limited) are throttled per identifier and address in PostgreSQL
  // (src/auth/login-throttle.ts; test/auth/login-throttle.test.ts has the policy in full).
  const LOGIN = `mutation ($s: String!) { login(input: {identifier: "admin", secret: $s}) { token } }`;
  for (let i = 0; i < 3; i++) t.equal((await gql(ts.url(), LOGIN, { s: `wrong-password-${i}` })).body.errors?.[0].message, 'invalid credentials');
  // Past the limit each failure doubles the wait; four more failures' worth of it (16 s) keeps this test off the clock.
  await ts.service.sql`update auth_login_failures set failures = failures + 4, last_failed_at = now() where key like 'pair:%'`;
  const blocked = await gql(ts.url(), LOGIN, { s: ADMIN_SECRET });
  t.match(blocked.body.errors?.[0], { message: 'too many failed login attempts', extensions: { code: 'RATE_LIMITED', retryable: true, retryAfterSeconds: Number } });
  const wait = blocked.body.errors![0].extensions.retryAfterSeconds as number;
  t.ok(wait > 8 && wait <= 16, `held back for the doubled delay, not the window: ${wait} s`);
  const other = await gql(ts.url(), `mutation { login(input: {identifier: "nobody@example.com", secret: "whatever-secret"}) { token } }`);
  t.equal(other.body.errors?.[0].message, 'invalid credentials', 'other identifiers are not blocked');
  await ts.service.sql`update auth_login_failures set last_failed_at = now() - interval '1 minute'`;
  t.ok((await gql(ts.url(), LOGIN, { s: ADMIN_SECRET })).body.data?.login.token, 'once the delay is over the right password is let in');
  await ts.service.audit.flush();
  const [{ n }] = await ts.service.sql<[{ n: number }]>`select count(*)::int as n from audit_log where event = 'auth.login' and details->>'reason' = 'rate_limited'`;
  t.equal(n, 1);
});

t.test('the per-address failure limit counts every identifier, and holds back rather than refuses', async (t) => {
  const ts = await startAuthService(t, { SVC_LOGIN_FAILURE_IP_LIMIT: '4', SVC_LOGIN_FAILURE_MAX_DELAY_SECS: '1' });
  for (let i = 0; i < 4; i++) await gql(ts.url(), `mutation { login(input: {identifier: "u${i}@example.com", secret: "whatever-secret"}) { token } }`);
  const [row] = await ts.service.sql<{ failures: number }[]>`select failures from auth_login_failures where key like 'ip:%'`;
  t.equal(row?.failures, 4, 'four identifiers, one address counter');
  // A sprayer's hundred: the address's delay is minutes; a hold stops at SVC_LOGIN_FAILURE_MAX_DELAY_SECS.
  await ts.service.sql`update auth_login_failures set failures = 100, last_failed_at = now() where key like 'ip:%'`;
  const started = Date.now();
  const res = await gql(ts.url(), `mutation { login(input: {identifier: "admin", secret: "${ADMIN_SECRET}"}) { token } }`);
  t.ok(res.body.data?.login?.token, 'the right password is let in');
  t.ok(Date.now() - started >= 900, 'after a hold');
});
