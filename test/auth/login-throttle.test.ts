// Issue 21 point 6 and issue 32 point 2: login throttling that does not lock out the innocent. Failures
// are counted per (identity, address), per identity and per address (src/auth/login-throttle.ts): other
// clients behind the administrator's address do not lock the administrator out, a guesser's address is
// refused for delays that double, the identity and the address past their limits only hold attempts
// back, a burst sent at once gets one try per free slot, and refusals are 429 with Retry-After.
// Clients are told apart by X-Forwarded-For from a trusted proxy (the test client is that proxy). Delays
// are steered by moving a counter's last failure back in PostgreSQL, never by sleeping.
import postgres from 'postgres';
import t from 'tap';
import { holdMs, releaseAt } from '../../src/auth/login-throttle.js';
import { forgiveLoginAttempt, purgeOldLoginFailures } from '../../src/auth/queries.js';
import { ADMIN_SECRET, startAuthService } from '../helpers/auth.js';
import type { TestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

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

t.test('the policy: doubling delays past a limit, nothing past the window, holds bounded', async (t) => {
  const at = (failures: number, lastFailedMs = 100_000) => ({ failures, windowStartedMs: 0, lastFailedMs });
  t.equal(releaseAt(at(4), 5, 900), null, 'under the limit: nothing held back');
  t.equal(releaseAt(at(5), 5, 900), 101_000, 'at the limit: 1 s after the last failure');
  t.equal(releaseAt(at(8), 5, 900), 108_000, 'three more: 8 s');
  t.equal(releaseAt(at(30), 5, 900), 900_000, 'never past the window');
  t.equal(releaseAt(at(1000), 5, 900), 900_000, 'however many failures');
  t.equal(holdMs(at(4), 5, 900, 10, 100_000), 0, 'a hold: nothing under the limit');
  t.equal(holdMs(at(6), 5, 900, 10, 100_500), 1500, 'past it, the rest of the delay');
  t.equal(holdMs(at(1000), 1000, 900, 10, 100_000), 1000, 'at the ceiling: 1 s');
  t.equal(holdMs(at(1030), 1000, 900, 10, 100_000), 10_000, 'never more than the longest hold');
  t.equal(holdMs(at(1030), 1000, 900, 10, 900_000), 0, 'nor past the window');
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
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from auth_login_failures where (key like 'pair:%' or key like 'id:%') and failures > 0`;
  t.equal(n, 0, "a success clears the identity's counters");

  await ts.service.audit.flush();
  const [{ limited }] = await sql<[{ limited: number }]>`select count(*)::int as limited from audit_log where event = 'auth.login' and details->>'reason' = 'rate_limited'`;
  t.equal(limited, 3, 'every held-back attempt is audited');
});

const timed = async <T>(fn: () => Promise<T>) => {
  const started = Date.now();
  const value = await fn();
  return { ...value, ms: Date.now() - started };
};

t.test('one identity from many addresses: held back past the identity limit, never refused', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '3', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '5', SVC_LOGIN_FAILURE_MAX_DELAY_SECS: '1' });
  for (let i = 0; i < 5; i++) t.equal((await login(ts, `192.0.2.${10 + i}`, 'admin', `wrong-${i}`)).message, 'invalid credentials');
  // Nine failures: the identity's own delay is 16 s; a hold lasts SVC_LOGIN_FAILURE_MAX_DELAY_SECS at most.
  await ts.service.sql`update auth_login_failures set failures = 9, last_failed_at = now() where key like 'id:%'`;
  const wrong = await timed(() => login(ts, '192.0.2.97', 'admin', 'another guess'));
  t.match(wrong, { message: 'invalid credentials' }, 'a guess from a fresh address is checked');
  t.ok(wrong.ms >= 900 && wrong.ms < 5000, `after a hold: ${wrong.ms} ms`);
  // Every spelling of the administrator counts on one identity: its id is not a way around the hold.
  const [{ id }] = await ts.service.sql<[{ id: string }]>`select id from entities where name = 'admin'`;
  const byId = await timed(() => login(ts, '192.0.2.98', id, ADMIN_SECRET));
  t.ok(byId.ok && byId.ms >= 900, `the right password, by id, is let in after the hold: ${byId.ms} ms`);
  const other = await timed(() => login(ts, '192.0.2.99', 'someone-else', 'a wrong password'));
  t.ok(other.message === 'invalid credentials' && other.ms < 900, `other identities are not held back: ${other.ms} ms`);
});

t.test('one address, every identity: held back past the ceiling, never refused', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_IP_LIMIT: '4', SVC_LOGIN_FAILURE_MAX_DELAY_SECS: '1' });
  for (let i = 0; i < 4; i++) await login(ts, '198.51.100.50', `u${i}@example.com`, 'a wrong password');
  // A sprayer's thousand failures: the address's delay runs to the window's end; holds stop at 1 s.
  await ts.service.sql`update auth_login_failures set failures = 1000, last_failed_at = now() where key like 'ip:%'`;
  const held = await timed(() => login(ts, '198.51.100.50', 'admin', ADMIN_SECRET));
  t.ok(held.ok, `the administrator behind that address is let in (${held.message ?? 'ok'})`);
  t.ok(held.ms >= 900 && held.ms < 5000, `after a hold: ${held.ms} ms`);
  const elsewhere = await timed(() => login(ts, '198.51.100.51', 'admin', ADMIN_SECRET));
  t.ok(elsewhere.ok && elsewhere.ms < 900, `another address is not held back: ${elsewhere.ms} ms`);
});

t.test('a burst of guesses sent at once gets the free tries, not one each', async (t) => {
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '3' });
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => login(ts, '203.0.113.77', 'admin', `guess-${i}`)));
  const tried = answers.filter((a) => a.message === 'invalid credentials').length;
  const held = answers.filter((a) => a.code === 'RATE_LIMITED').length;
  t.equal(tried + held, 20);
  // Three free tries, and at most one more if a 1-second delay ran out while the burst was being served.
  t.ok(tried >= 3 && tried <= 4, `${tried} guesses were checked, ${held} held back`);

  // On the same database: the sweep any instance runs every ten minutes.
  await t.test('the sweep bounds the counters: closed windows, zeros, then the fewest failures first', async (t) => {
    const sql = ts.service.sql;
    await sql`
      insert into auth_login_failures (key, failures, window_started_at, last_failed_at)
      select 'pair:guess-' || g || E'\n203.0.113.9', 1, now(), now() - make_interval(secs => g) from generate_series(1, 1500) g`;
    await sql`insert into auth_login_failures (key, failures, window_started_at, last_failed_at) values
      ('id:victim', 40, now(), now() - interval '1 hour'), ('ip:198.51.100.1', 0, now(), now()), ('id:old', 50, now() - interval '1 day', now() - interval '1 day')`;
    await purgeOldLoginFailures(sql, 900, 1000);
    const rows = await sql<{ key: string }[]>`select key from auth_login_failures`;
    t.equal(rows.length, 1000, 'at most SVC_LOGIN_FAILURE_MAX_KEYS left');
    const keys = new Set(rows.map((r) => r.key));
    t.ok(keys.has('id:victim'), 'a counter holding an identity back stays');
    t.notOk(keys.has('ip:198.51.100.1') || keys.has('id:old'), 'zeros and closed windows go');
    t.ok(keys.has('pair:guess-1\n203.0.113.9') && !keys.has('pair:guess-1500\n203.0.113.9'), 'one-failure counters go least recent first');
  });
});

t.test('concurrent logins of one identity, right and wrong, never deadlock on the counters', async (t) => {
  // A right secret forgives its counters while other attempts of the same identity hold them: every
  // statement takes the rows in key order, so neither waits on the other in a cycle (a deadlock answered
  // 503 "concurrent update, retry" to a right password).
  const ts = await startAuthService(t, { ...PROXY, SVC_LOGIN_FAILURE_LIMIT: '1000', SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '100000', SVC_LOGIN_FAILURE_IP_LIMIT: '100000' });
  for (let round = 0; round < 8; round++) {
    // Each round starts with no counters: the attempts create them as right secrets clear them.
    await ts.service.sql`delete from auth_login_failures`;
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) =>
      login(ts, '203.0.113.90', 'admin', i % 4 === 0 ? 'a wrong password' : ADMIN_SECRET, i % 2 ? 'rest' : 'graphql')));
    const unexpected = answers.filter((a, i) => (i % 4 === 0 ? a.message !== 'invalid credentials' : !a.ok));
    t.same(unexpected, [], `round ${round}: every right password let in, every wrong one refused`);
  }
});

t.test('forgiving takes the counters in key order: no deadlock with an attempt locking them', async (t) => {
  // The interleaving the isolation matrix met: an attempt holds the first of its keys (it locks them in
  // key order) while a right secret forgives the same identity. A forgiveness that locked in table order
  // would take the second key first and wait on the first: a cycle PostgreSQL breaks with a deadlock.
  const ts = await startAuthService(t, PROXY);
  const holder = postgres(ts.db.url, { max: 2, onnotice: () => undefined });
  t.teardown(() => holder.end({ timeout: 1 }));
  const [first, second] = ['id:deadlock-probe', 'pair:deadlock-probe\n203.0.113.5'];
  for (const [shape, forgive] of [
    ['clearing', () => forgiveLoginAttempt(ts.service.sql, [second, first], [])],
    ['taking back', () => forgiveLoginAttempt(ts.service.sql, [], [second, first])],
  ] as const) {
    // The second key is written first, so a scan in table order meets it first.
    await holder`delete from auth_login_failures where key in (${first}, ${second})`;
    await holder`insert into auth_login_failures (key, failures, window_started_at, last_failed_at) values (${second}, 2, now(), now())`;
    await holder`insert into auth_login_failures (key, failures, window_started_at, last_failed_at) values (${first}, 2, now(), now())`;
    let forgiven: Promise<unknown> | undefined;
    await holder.begin(async (tx) => {
      await tx`select key from auth_login_failures where key = ${first} for update`;
      forgiven = forgive().then(() => 'done', (err: { code?: string }) => err.code ?? String(err));
      await waitForLockWait(holder, 'auth_login_failures');
      await tx`select key from auth_login_failures where key = ${second} for update`;
    });
    t.equal(await forgiven, 'done', `${shape}: the forgiveness waited its turn and finished`);
  }
  // The sweep skips what an attempt holds rather than wait on it; the next sweep takes it.
  await holder`update auth_login_failures set failures = 0 where key = ${first}`;
  await holder.begin(async (tx) => {
    await tx`select key from auth_login_failures where key = ${first} for update`;
    await purgeOldLoginFailures(ts.service.sql, 900, 1000);
    t.equal((await holder`select 1 from auth_login_failures where key = ${first}`).length, 1, 'a held zero counter is left to the next sweep');
  });
  await purgeOldLoginFailures(ts.service.sql, 900, 1000);
  t.equal((await holder`select 1 from auth_login_failures where key = ${first}`).length, 0, 'which takes it');
});

t.test('an attempt that waited on counters a right secret was clearing is counted on them', async (t) => {
  // The right secret's statement holds the identity's counters when a wrong guess arrives: the guess
  // waits for it, then counts on the cleared counters: a cleared counter is not a free guess.
  const ts = await startAuthService(t, PROXY);
  const holder = postgres(ts.db.url, { max: 2, onnotice: () => undefined });
  t.teardown(() => holder.end({ timeout: 1 }));
  t.equal((await login(ts, '203.0.113.6', 'admin', 'a first wrong password')).message, 'invalid credentials');
  const keys = await holder<{ key: string }[]>`select key from auth_login_failures where key like 'id:%' or key like 'pair:%' order by key`;
  const [identity, pair] = keys.map((k) => k.key) as [string, string];
  let forgiven: Promise<unknown> | undefined;
  let guess: ReturnType<typeof login> | undefined;
  await holder.begin(async (tx) => {
    await tx`select key from auth_login_failures where key = ${pair} for update`;
    forgiven = forgiveLoginAttempt(ts.service.sql, [pair, identity], []);
    await waitForLockWait(holder, 'auth_login_failures', 1); // it holds the identity's counter
    guess = login(ts, '203.0.113.6', 'admin', 'a second wrong password');
    await waitForLockWait(holder, 'auth_login_failures', 2); // the guess waits on it
  });
  await forgiven;
  t.equal((await guess!).message, 'invalid credentials');
  const after = await holder<{ key: string; failures: number }[]>`select key, failures from auth_login_failures where key in (${identity}, ${pair}) order by key`;
  t.same(after.map((r) => r.failures), [1, 1], 'the guess counts on the identity and on the pair');
});

/** Resolves once `waiters` backends wait on a lock in a statement naming the table. */
function waitForLockWait(sql: postgres.Sql, table: string, waiters = 1): Promise<void> {
  return waitUntil(async () => {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query ilike ${`%${table}%`}`;
    return row!.n >= waiters;
  }, 5000, `${waiters} waiting on ${table}`);
}

t.test('an attempt the database cut before its verdict is not counted as a guess', async (t) => {
  const ts = await startAuthService(t, PROXY);
  const holder = postgres(ts.db.url, { max: 2, onnotice: () => undefined });
  t.teardown(() => holder.end({ timeout: 1 }));
  const failures = async () => (await holder<{ key: string; failures: number }[]>`
    select key, failures from auth_login_failures where key like 'pair:%' or key like 'id:%' or key like 'ip:203.0.113.40%'`)
    .reduce((sum, row) => sum + row.failures, 0);

  // The credential lookup waits on a lock the test holds; its backend is terminated while it waits, after
  // the attempt was admitted (counted) and before the secret was looked at.
  for (const [kind, identifier, secret] of [['password', 'admin', 'a wrong password'], ['shared_key', 'admin', 'not-a-key']] as const) {
    let answer: ReturnType<typeof login> | undefined;
    await holder.begin(async (tx) => {
      await tx`lock table credentials in access exclusive mode`;
      const body = { query: 'mutation ($i: LoginInput!) { login(input: $i) { token } }', variables: { i: { identifier, secret, kind } } };
      answer = fetch(`${ts.url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.40' }, body: JSON.stringify(body) })
        .then(async (res) => ({ status: res.status, body: (await res.json()) as { errors?: { extensions: { code: string } }[] } })) as never;
      let waiting: { pid: number }[] = [];
      for (let i = 0; i < 200 && waiting.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 25));
        waiting = await holder<{ pid: number }[]>`
          select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike '%from credentials%'`;
      }
      t.equal(waiting.length, 1, `${kind}: the lookup waits on the lock`);
      t.equal(await failures(), 3, `${kind}: the attempt was counted as it was admitted`);
      await holder`select pg_terminate_backend(${waiting[0]!.pid})`;
    });
    const { status, body } = (await answer) as unknown as { status: number; body: { errors?: { extensions: { code: string } }[] } };
    t.match({ status, code: body.errors?.[0]?.extensions.code }, { code: 'SERVICE_UNAVAILABLE' }, `${kind}: the caller is told to retry`);
    t.equal(await failures(), 0, `${kind}: and the attempt is not counted: no verdict, no guess`);
  }
  // The same wrong password with the database whole is a counted failure: the check above could fail.
  t.equal((await login(ts, '203.0.113.40', 'admin', 'a wrong password')).message, 'invalid credentials');
  t.equal(await failures(), 3, 'a real failure counts on the pair, the identity and the address');
});
