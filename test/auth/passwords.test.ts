import t from 'tap';
import { hashPassword, needsRehash, parseHash, verifyPaced, verifyPassword } from '../../src/auth/passwords.js';
import { ADMIN_ID, ADMIN_SECRET, adminToken, insertEntity, insertTenant, login, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';

const SET_PW = `mutation ($id: ID!, $pw: String!) { createPassword(entityId: $id, password: $pw) }`;
const CHANGE = `mutation ($c: String!, $n: String!) { changeOwnPassword(currentPassword: $c, newPassword: $n) }`;

t.test('scrypt encoding carries its parameters and salt; verification is exact', async (t) => {
  const params = { cost: 1024, blockSize: 8, parallelization: 1 };
  const a = await hashPassword('correct horse battery', params);
  const b = await hashPassword('correct horse battery', params);
  t.match(a, /^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9+/]+={0,2}\$[A-Za-z0-9+/]+={0,2}$/);
  t.not(a, b, 'salted');
  t.equal(parseHash(a)?.salt.length, 16);
  t.ok(await verifyPassword('correct horse battery', a));
  t.notOk(await verifyPassword('correct horse batterY', a));
  t.notOk(await verifyPassword('x', 'not a hash'));
  t.notOk(needsRehash(a, params));
  t.ok(needsRehash(a, { ...params, cost: 2048 }));
});

t.test('a check of a hash made with other parameters answers no sooner than one at today\'s', async (t) => {
  const today = await hashPassword('reference', { cost: 16384, blockSize: 8, parallelization: 1 });
  const older = await hashPassword('pw', { cost: 1024, blockSize: 8, parallelization: 1 });
  const timed = async (check: () => Promise<boolean>) => {
    const started = process.hrtime.bigint();
    const ok = await check();
    return { ok, ms: Number(process.hrtime.bigint() - started) / 1e6 };
  };
  await verifyPassword('warm-up', today);
  const reference: number[] = [];
  const paced: number[] = [];
  for (let i = 0; i < 3; i++) {
    reference.push((await timed(() => verifyPassword('wrong', today))).ms);
    const check = await timed(() => verifyPaced('wrong', older, today));
    t.equal(check.ok, false);
    paced.push(check.ms);
  }
  // 16 times the work of the older hash: unpaced, its check would take a small fraction of the reference's.
  const [fastestPaced, fastestReference] = [Math.min(...paced), Math.min(...reference)];
  t.ok(fastestPaced > fastestReference * 0.5, `paced ${fastestPaced.toFixed(1)} ms, reference ${fastestReference.toFixed(1)} ms (fastest of 3)`);
  t.equal((await timed(() => verifyPaced('pw', older, today))).ok, true, 'the right password still matches');
  t.equal(await verifyPaced('reference', today, today), true, 'a hash at today\'s parameters is checked once');
  t.equal(await verifyPaced('pw', 'not a hash', today), false, 'a hash that does not parse never matches');
});

t.test('createPassword: policy, self, authority; changeOwnPassword; stale parameters are upgraded at login', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const user = await insertEntity(ts, { name: 'user' });
  const short = await gql(ts.url(), SET_PW, { id: user, pw: 'short' }, admin);
  t.match(short.body.errors?.[0], { message: 'password must be at least 12 characters', extensions: { code: 'BAD_REQUEST' } });
  t.equal((await gql(ts.url(), SET_PW, { id: user, pw: 'first-password-x' }, admin)).body.data?.createPassword, true);
  const userToken = (await login(ts, 'user', 'first-password-x')).token;
  t.equal((await gql(ts.url(), SET_PW, { id: user, pw: 'second-password-x' }, userToken)).body.data?.createPassword, true, 'self allowed');
  await t.rejects(login(ts, 'user', 'first-password-x'), /invalid credentials/, 'the old password is replaced');
  t.equal((await gql(ts.url(), SET_PW, { id: ADMIN_ID, pw: 'takeover-password' }, userToken)).body.errors?.[0].message, 'forbidden');
  const missing = await gql(ts.url(), SET_PW, { id: '00000000-0000-0000-0000-00000000dead', pw: 'whatever-password' }, admin);
  t.equal(missing.body.errors?.[0].message, 'entity not found');
  t.equal((await gql(ts.url(), SET_PW, { id: 'nope', pw: 'whatever-password' }, admin)).body.errors?.[0].message, 'entityId must be a UUID');

  const wrong = await gql(ts.url(), CHANGE, { c: 'not-my-password', n: 'third-password-x' }, userToken);
  t.equal(wrong.body.errors?.[0].message, 'current password is incorrect');
  t.equal((await gql(ts.url(), CHANGE, { c: 'second-password-x', n: 'third-password-x' }, userToken)).body.data?.changeOwnPassword, true);
  t.ok(await login(ts, 'user', 'third-password-x'));
  const [{ n }] = await ts.service.sql<[{ n: number }]>`
    select count(*)::int as n from credentials where entity_id = ${user} and kind = 'password' and status = 'active'`;
  t.equal(n, 1, 'one active password at a time');

  // Workspace managers set passwords of the workspace's entities; never of other workspaces'.
  const tenant = await insertTenant(ts, 'ws');
  const other = await insertTenant(ts, 'ws2');
  const svcA = await insertEntity(ts, { name: 'svc', kind: 'service', tenantId: tenant });
  const svcB = await insertEntity(ts, { name: 'svc', kind: 'service', tenantId: other });
  const manager = await insertEntity(ts, { name: 'manager' });
  const [role] = await ts.service.sql<{ id: string }[]>`insert into roles (name, tenant_id) values ('ws-manage', ${tenant}) returning id`;
  const [block] = await ts.service.sql<{ id: string }[]>`insert into permission_blocks (tenant_id, scope_mode, effect) values (${tenant}, 'tenant', 'allow') returning id`;
  await ts.service.sql`insert into permission_block_actions (block_id, action_id) select ${block!.id}, id from actions where name = 'manage'`;
  await ts.service.sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${block!.id})`;
  await ts.service.sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenant}, 'entity', ${manager}, ${role!.id})`;
  const managerToken = await tokenFor(ts, manager);
  t.equal((await gql(ts.url(), SET_PW, { id: svcA, pw: 'service-password-x' }, managerToken)).body.data?.createPassword, true);
  t.equal((await gql(ts.url(), SET_PW, { id: svcB, pw: 'service-password-x' }, managerToken)).body.errors?.[0].message, 'forbidden');

  await ts.service.sql`
    update credentials set secret_hash = ${await hashPassword('third-password-x', { cost: 2048, blockSize: 8, parallelization: 1 })}
    where entity_id = ${user} and kind = 'password' and status = 'active'`;
  t.ok(await login(ts, 'user', 'third-password-x'), 'a hash with other parameters still verifies');
  await new Promise((r) => setTimeout(r, 200));
  const [row] = await ts.service.sql<{ secret_hash: string }[]>`select secret_hash from credentials where entity_id = ${user} and kind = 'password' and status = 'active'`;
  t.match(row!.secret_hash, /^\$scrypt\$ln=10,/, 'and is rehashed with the configured ones');
  await ts.service.audit.flush();
  const events = await ts.service.sql<{ n: number }[]>`select count(*)::int as n from audit_log where event = 'password.set'`;
  t.ok(events[0]!.n >= 4, 'password.set audited');
  t.ok(ADMIN_SECRET);
});
