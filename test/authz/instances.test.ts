// Two service instances on one database: a grant revoked through instance A is denied by instance B,
// over B's own POST /authz/check, through the invalidation NOTIFY (B's cache entries would live 60 s).
// How soon is measured by bench/scenarios/authz-propagation.js, not asserted here: a timed assertion
// would measure the CI machine's load.
import t from 'tap';
import { request } from 'undici';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { startTestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
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

t.test('revoke through A, B denies through NOTIFY, long before its cache would expire', async (t) => {
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
  const question = { subjectId: ids.dev as string, action: 'publish', object: { kind: 'resource' as const, id: ids.ch as string } };
  await waitUntil(async () => !(await b.service.authz.authorize(question)).allowed, 5000, 'B denying');
  t.same(await checkOnB(), { allowed: false, reason: 'no matching allow policy' }, 'and so does its HTTP API');
});
