// Two instances on one database: an endpoint created, changed or disabled on A reaches B's routing table
// through the NOTIFY sent at commit; B finds it without reading the database.
import t from 'tap';
import { AUTH_ENV, adminToken, startAuthService } from '../helpers/auth.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { ok } from '../helpers/management.js';
import type { Route } from '../../src/custom-endpoints/index.js';
import { DISABLE, ENABLE, UPDATE, callEndpoint, createEndpoint } from './helpers.js';

/**
 * The changes B's table applies, kept from the start: a step marks where it begins, then waits for a
 * change of its endpoint after the mark (the NOTIFY may reach B before A has answered the test).
 */
function watch(ts: TestService) {
  const seen: { id: string; route: Route | undefined }[] = [];
  const waiters = new Set<() => void>();
  ts.service.customEndpoints.router.onChange((id, route) => {
    seen.push({ id, route });
    for (const w of [...waiters]) w();
  });
  return {
    mark: () => seen.length,
    until(mark: number, id: string, test: (route: Route | undefined) => boolean): Promise<void> {
      const found = () => seen.slice(mark).some((c) => c.id === id && test(c.route));
      return new Promise((resolve) => {
        if (found()) return resolve();
        const w = () => {
          if (!found()) return;
          waiters.delete(w);
          resolve();
        };
        waiters.add(w);
      });
    },
  };
}

t.test('an endpoint created on instance A is callable on instance B', async (t) => {
  const a = await startAuthService(t);
  const b = await startTestService(t, { ...AUTH_ENV }, a.db);
  const token = await adminToken(a);
  t.equal((await callEndpoint(b, '/api/custom/shared', { token })).status, 404, 'not there yet');

  const changes = watch(b);
  // Created as a draft on A: B learns of it (and keeps it out of its table).
  let mark = changes.mark();
  const { id } = await createEndpoint(a, { path: '/api/custom/shared', status: 'draft' });
  await changes.until(mark, id, (route) => route === undefined);
  t.equal((await callEndpoint(b, '/api/custom/shared', { token })).status, 404, 'a draft on B too');

  mark = changes.mark();
  await ok(a, token, ENABLE, { id });
  await changes.until(mark, id, (route) => route !== undefined);
  t.same(await callEndpoint(b, '/api/custom/shared', { token }), { status: 200, body: { health: 'ok' } }, 'callable on B');
  // B finds it in memory: with the table out of reach, the call is still routed (the decision is cached).
  await a.service.sql`alter table api_endpoints rename to api_endpoints_away`;
  const unreadable = await callEndpoint(b, '/api/custom/shared', { token });
  await a.service.sql`alter table api_endpoints_away rename to api_endpoints`;
  t.same(unreadable, { status: 200, body: { health: 'ok' } }, 'routed without reading api_endpoints');

  mark = changes.mark();
  await ok(a, token, UPDATE, { id, i: { path: '/api/custom/moved' } });
  await changes.until(mark, id, (route) => route?.path === '/api/custom/moved');
  t.equal((await callEndpoint(b, '/api/custom/shared', { token })).status, 404, 'the old path is gone on B');
  t.equal((await callEndpoint(b, '/api/custom/moved', { token })).status, 200, 'the new one answers on B');

  mark = changes.mark();
  await ok(a, token, DISABLE, { id });
  await changes.until(mark, id, (route) => route === undefined);
  t.equal((await callEndpoint(b, '/api/custom/moved', { token })).status, 404, 'disabled on A: gone on B');
});

t.test('a lost LISTEN connection reloads the whole table', async (t) => {
  const a = await startAuthService(t);
  const b = await startTestService(t, { ...AUTH_ENV }, a.db);
  const token = await adminToken(a);
  // A change no NOTIFY announces (written with the trigger off): only the reload after a reconnect finds it.
  await a.service.sql`alter table api_endpoints disable trigger api_endpoints__notify_changed`;
  const [row] = await a.service.sql<{ id: string }[]>`
    insert into api_endpoints (key, name, method, path, operation_kind, graphql, status)
    values ('unannounced', 'unannounced', 'GET', '/api/custom/unannounced', 'query', 'query { health }', 'active') returning id`;
  await a.service.sql`alter table api_endpoints enable trigger api_endpoints__notify_changed`;
  t.equal((await callEndpoint(b, '/api/custom/unannounced', { token })).status, 404, 'unknown to B');
  const changes = watch(b);
  const mark = changes.mark();
  await a.service.sql`select pg_terminate_backend(${b.service.hub.backendPid!})`;
  await changes.until(mark, row!.id, (route) => route !== undefined);
  t.equal((await callEndpoint(b, '/api/custom/unannounced', { token })).status, 200, 'known on B after its reconnect');
});
