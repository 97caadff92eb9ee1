// Two service instances on one database: a grant revoked through instance A is denied by instance B,
// over B's own POST /authz/check, within 100 ms of A's invalidate returning.
import t from 'tap';
import { request } from 'undici';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { startTestService } from '../helpers/service.js';
import { seedWorld, type World } from './helpers/world.js';

const world: World = {
  tenants: { acme: {} },
  entities: { dev: { kind: 'device', tenant: 'acme' } },
  resources: { ch: { kind: 'channel', tenant: 'acme' } },
  groups: {},
  objectMembers: [],
  principalMembers: [],
  blocks: { pub: { scope: 'object', tenant: 'acme', object: 'ch', actions: ['publish'] } },
  roles: {},
  assignments: [],
  policies: [{ entity: 'dev', block: 'pub', tenant: 'acme' }],
  credentials: {},
};

t.test('revoke through A, B denies within 100 ms', async (t) => {
  const a = await startTestService(t, AUTH_ENV);
  const b = await startTestService(t, AUTH_ENV, a.db);
  const ids = await seedWorld(a.service.sql as never, world);
  const token = await adminToken(b);
  const body = JSON.stringify({ subject_id: ids.dev, action: 'publish', resource_id: ids.ch });
  const checkOnB = async () => {
    const res = await request(`${b.url()}/authz/check`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    return (await res.body.json()) as { allowed: boolean; reason: string };
  };
  t.same(await checkOnB(), { allowed: true, reason: 'allowed' });
  t.same(await checkOnB(), { allowed: true, reason: 'allowed' }, 'now served from B\'s cache');
  t.ok(b.service.authz.stats().decisions > 0);

  await a.service.sql`delete from direct_policies where entity_id = ${ids.dev as string}`;
  await a.service.authz.invalidate({ kind: 'subjects', entityIds: [ids.dev as string] });
  // Poll B's engine in-process (an HTTP round trip per poll would measure the test's own latency), then
  // confirm over B's HTTP listener.
  const started = performance.now();
  const question = { subjectId: ids.dev as string, action: 'publish', object: { kind: 'resource' as const, id: ids.ch as string } };
  let decision = await b.service.authz.authorize(question);
  while (decision.allowed && performance.now() - started < 1000) {
    await new Promise((r) => setImmediate(r));
    decision = await b.service.authz.authorize(question);
  }
  const elapsed = performance.now() - started;
  t.equal(decision.allowed, false, 'B denies');
  t.ok(elapsed < 100, `B denied ${elapsed.toFixed(1)} ms after A's invalidate returned`);
  t.same(await checkOnB(), { allowed: false, reason: 'no matching allow policy' }, 'and so does its HTTP API');
});
