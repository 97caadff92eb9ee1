import t from 'tap';
import { startService } from '../../src/main.js';
import type { MailMessage } from '../../src/auth/index.js';
import { AUTH_ENV, login, startAuthService } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { QUIET_LISTENERS, gql, testLogger } from '../helpers/service.js';

const SIGNUP = `mutation ($input: SignupInput!) { signup(input: $input) { entityId email verificationRequired } }`;

t.test('signup is refused with the exact message when self-registration is off', async (t) => {
  const ts = await startAuthService(t, { SVC_SELF_REGISTRATION_ENABLED: 'false' });
  const res = await gql(ts.url(), SIGNUP, { input: { name: 'x', email: 'x@example.com', password: 'a-long-enough-password' } });
  t.equal(res.body.errors?.[0].message, 'sign up is not enabled');
  const rest = await fetch(`${ts.url()}/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'x', email: 'x@example.com', password: 'a-long-enough-password' }),
  });
  t.equal(rest.status, 403);
  t.same(await rest.json(), { error: 'sign up is not enabled' });
  const config = await (await fetch(`${ts.url()}/auth/public-config`)).json();
  t.same(config, { signup_enabled: false, self_registration_enabled: false, oauth_providers: [], email_verification_required: false, dev_allow_unverified_email_login: false });
});

t.test('signup: lowercased unique email, password policy, joins authenticated-users, can log in', async (t) => {
  const ts = await startAuthService(t);
  const res = await gql(ts.url(), SIGNUP, { input: { name: 'Ann', email: '  Ann@Example.COM ', password: 'a-long-enough-password', attributes: { team: 'x' } } });
  const out = res.body.data!.signup;
  t.match(out, { email: 'ann@example.com', verificationRequired: false });
  const session = await login(ts, 'ANN@example.com', 'a-long-enough-password');
  t.equal(session.entityId, out.entityId);
  const [member] = await ts.service.sql`select 1 from principal_group_members where group_id = '00000000-0000-0000-0000-000000000005' and entity_id = ${out.entityId}`;
  t.ok(member, 'member of authenticated-users');
  const dup = await gql(ts.url(), SIGNUP, { input: { name: 'Ann 2', email: 'ann@EXAMPLE.com', password: 'a-long-enough-password' } });
  t.match(dup.body.errors?.[0], { message: 'this email is already registered', extensions: { code: 'CONFLICT' } });
  const short = await gql(ts.url(), SIGNUP, { input: { name: 'Bob', email: 'bob@example.com', password: 'short' } });
  t.equal(short.body.errors?.[0].message, 'password must be at least 12 characters');
  const badEmail = await gql(ts.url(), SIGNUP, { input: { name: 'Bob', email: 'bob', password: 'a-long-enough-password' } });
  t.equal(badEmail.body.errors?.[0].message, 'email is not a valid address');
  const rest = await fetch(`${ts.url()}/auth/signup`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Cy', email: 'cy@example.com', password: 'a-long-enough-password' }),
  });
  t.equal(rest.status, 202);
  t.match(await rest.json(), { entity_id: String, email: 'cy@example.com', verification_required: false });
});

t.test('verification flow: the mailer gets a token, login waits for it', async (t) => {
  const db = await createTestDatabase();
  const mails: MailMessage[] = [];
  const service = await startService({
    ...QUIET_LISTENERS, ...AUTH_ENV, SVC_RATE_LIMIT_ENABLED: 'false', SVC_EMAIL_VERIFICATION_REQUIRED: 'true', DATABASE_URL: db.url,
  }, { log: testLogger(), mailer: { send: async (m) => void mails.push(m) } });
  t.teardown(async () => {
    await service.stop();
    await db.drop();
  });
  const ts = { service, db, url: () => `http://127.0.0.1:${service.ports.http}` };
  const res = await gql(ts.url(), SIGNUP, { input: { name: 'Dee', email: 'dee@example.com', password: 'a-long-enough-password' } });
  t.equal(res.body.data?.signup.verificationRequired, true);
  t.equal(mails.length, 1);
  t.equal(mails[0]!.to, 'dee@example.com');
  const token = /token=([A-Za-z0-9_-]+)/.exec(mails[0]!.text)?.[1];
  t.ok(token, 'the mail carries a verification link');
  await t.rejects(login(ts, 'dee@example.com', 'a-long-enough-password'), /email address is not verified/);
  const bad = await fetch(`${ts.url()}/auth/email/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: 'nope' }) });
  t.equal(bad.status, 400);
  const ok = await fetch(`${ts.url()}/auth/email/verify?token=${token}`);
  t.same(await ok.json(), { verified: true });
  const session = await gql(ts.url(), `mutation { login(input: {identifier: "dee@example.com", secret: "a-long-enough-password"}) { entityId emailVerified verificationRequired } }`);
  t.match(session.body.data?.login, { emailVerified: true, verificationRequired: false });
  const again = await fetch(`${ts.url()}/auth/email/verify?token=${token}`);
  t.equal(again.status, 400, 'a token works once');
  const resend = await fetch(`${ts.url()}/auth/email/resend`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dee@example.com' }) });
  t.equal(resend.status, 202);
  t.equal(mails.length, 1, 'nothing to resend for a verified address');
});
