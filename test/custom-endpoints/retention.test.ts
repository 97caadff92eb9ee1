// What bounds the execution log: requests that name no endpoint leave no record (20,000 of them, some with
// 16 KB paths), a record keeps a bounded path, a body nested 100,000 deep is a 400 with its record, and the
// retention trims each endpoint's records by count and by age, one instance at a time.
import { connect } from 'node:net';
import t from 'tap';
import { createExecutionRetention } from '../../src/custom-endpoints/retention.js';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { testLogger, type TestService } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';
import { callEndpoint, createEndpoint, executionsOf } from './helpers.js';

/**
 * Statuses of pipelined GETs on one keep-alive connection, answered in order until the server closes it
 * (a refusal before the body is read closes the connection; what is unanswered is sent again on another).
 */
function oneConnection(port: number, paths: string[], headers: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const statuses: number[] = [];
    let pending = '';
    const socket = connect(port, '127.0.0.1', () => {
      socket.end(paths.map((p) => `GET ${p} HTTP/1.1\r\nhost: x\r\n${headers}\r\n`).join(''));
    });
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      pending += chunk;
      // Each answer is a status line, headers and a Content-Length body; whole answers come off the front.
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end === -1) break;
        const length = Number(/content-length: *(\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
        if (pending.length < end + 4 + length) break;
        statuses.push(Number(pending.slice(9, 12)));
        pending = pending.slice(end + 4 + length);
      }
      if (statuses.length === paths.length) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => (statuses.length > 0 ? resolve(statuses) : reject(new Error('a connection closed without an answer'))));
  });
}

/** Sends `paths` as pipelined keep-alive GETs over `sockets` parallel connections; the status of each answer. */
async function pipelined(ts: TestService, paths: string[], sockets: number, headers = ''): Promise<number[]> {
  const port = Number(new URL(ts.url()).port);
  const share = Math.ceil(paths.length / sockets);
  const runs = [];
  for (let s = 0; s < sockets; s++) {
    runs.push((async () => {
      const statuses: number[] = [];
      let rest = paths.slice(s * share, (s + 1) * share);
      while (rest.length > 0) {
        const answered = await oneConnection(port, rest.slice(0, 1000), headers);
        statuses.push(...answered);
        rest = rest.slice(answered.length);
      }
      return statuses;
    })());
  }
  return (await Promise.all(runs)).flat();
}

const count = async (ts: TestService) => (await ts.service.sql<[{ n: number }]>`select count(*)::int as n from api_endpoint_executions`)[0].n;

t.test('the execution log stays bounded', async (t) => {
  const ts = await startAuthService(t, {
    SVC_CUSTOM_ENDPOINT_EXECUTION_MAX_PER_ENDPOINT: '5', SVC_CUSTOM_ENDPOINT_EXECUTION_RETENTION_DAYS: '1',
    SVC_CUSTOM_ENDPOINT_EXECUTION_RETENTION_BATCH_SIZE: '3',
  });
  const admin = await adminToken(ts);
  const sql = ts.service.sql;

  await t.test('20,000 requests to paths that name no endpoint leave no record', async (t) => {
    await createEndpoint(ts, { path: '/api/custom/draft', status: 'draft' });
    const paths: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      if (i % 2000 === 0) paths.push(`/api/custom/${'x'.repeat(16_000)}${i}`);
      else if (i % 3 === 0) paths.push('/api/custom/draft');
      else paths.push(`/api/custom/unknown/${i}`);
    }
    const started = Date.now();
    const cpu = process.cpuUsage();
    const statuses = await pipelined(ts, paths, 8, `authorization: Bearer ${admin}\r\n`);
    const used = process.cpuUsage(cpu);
    t.comment(`20,000 requests in ${Date.now() - started} ms, ${Math.round((used.user + used.system) / 1000)} ms CPU (client and service)`);
    t.equal(statuses.length, 20_000);
    t.ok(statuses.every((s) => s === 404), 'each answered 404');
    await ts.service.customEndpoints.executions.flush();
    t.equal(await count(ts), 0, 'and none left a record');
  });

  await t.test('a body nested 100,000 deep is a 400 and its call is recorded', async (t) => {
    const forward = await createEndpoint(ts, { method: 'POST', path: '/api/custom/deep', operationKind: 'query', graphql: 'query { health }' });
    const validated = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/deep-validated', graphql: 'query { health }',
      requestSchema: { type: 'object', properties: { a: { type: 'object' } } },
    });
    const depth = 100_000;
    const bodies = [`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`, `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`];
    for (const [endpoint, path] of [[forward, '/api/custom/deep'], [validated, '/api/custom/deep-validated']] as const) {
      for (const rawBody of bodies) {
        const res = await callEndpoint(ts, path, { token: admin, method: 'POST', rawBody, headers: { 'content-type': 'application/json' } });
        t.same(res, { status: 400, body: { error: 'custom endpoint request body nests deeper than 64 levels' } }, path);
        const [record] = await executionsOf(ts, endpoint.id);
        t.match(record, { status: 'error', error: 'custom endpoint request body nests deeper than 64 levels', requestSummary: { path, variables: null } });
      }
    }
    const shallow = await callEndpoint(ts, '/api/custom/deep', { token: admin, method: 'POST', body: { a: { b: { c: [[1]] } } } });
    t.equal(shallow.status, 200, 'a body within the bound is served');
    await ts.service.customEndpoints.executions.flush();
    await sql`delete from api_endpoint_executions`;
  });

  await t.test('retention: per endpoint the newest N, none older than the age, one instance at a time', async (t) => {
    const retention = ts.service.customEndpoints.retention;
    const a = await createEndpoint(ts, { path: '/api/custom/a' });
    const b = await createEndpoint(ts, { path: '/api/custom/b' });
    const insert = (endpoint: string | null, minutesAgo: number[]) => sql`
      insert into api_endpoint_executions (endpoint_id, status, created_at)
      select ${endpoint}::uuid, 'success', now() - make_interval(mins => m) from unnest(${minutesAgo}::int[]) as m`;
    const lockHolder = sql.reserve();
    const held = await lockHolder;
    await held`begin`;
    await held`select pg_advisory_xact_lock(hashtextextended('custom-endpoints:execution-retention', 0))`;
    await insert(a.id, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    await insert(b.id, [1, 2, 3, 60 * 24 + 1, 60 * 24 + 2, 60 * 24 * 30]);
    await insert(null, [1, 2, 3, 4]);
    t.same(await retention.run(), { ran: false, deleted: 0 }, 'another holder of the lock: this instance skips');
    t.equal(await count(ts), 22);
    await held`rollback`;
    held.release();

    // 14 rows past the retention, 3 per statement: the pass goes on until a batch comes back short.
    t.same(await retention.run(), { ran: true, deleted: 7 + 3 + 4 });
    const minutes = async (id: string) => (await sql<{ m: number }[]>`
      select round(extract(epoch from now() - created_at) / 60)::int as m from api_endpoint_executions where endpoint_id = ${id} order by created_at desc`).map((r) => r.m);
    t.same(await minutes(a.id), [1, 2, 3, 4, 5], 'a: the newest 5');
    t.same(await minutes(b.id), [1, 2, 3], 'b: none older than a day');
    t.equal(await count(ts), 8, 'records of no endpoint are gone');
    t.same(await retention.run(), { ran: true, deleted: 0 }, 'nothing more to do');

    // Another instance's retention, every second: calls beyond the count are trimmed without being asked.
    const other = createExecutionRetention({ sql, log: testLogger(), settings: { ...ts.service.config.customEndpoints.retention, intervalSecs: 1 } });
    other.start();
    t.teardown(() => other.stop());
    for (let i = 0; i < 8; i++) t.equal((await callEndpoint(ts, '/api/custom/a', { token: admin })).status, 200);
    await ts.service.customEndpoints.executions.flush();
    await waitUntil(async () => (await minutes(a.id)).length === 5, 5000, 'the periodic pass trimming endpoint a');
    t.same(await minutes(a.id), [0, 0, 0, 0, 0], 'the newest calls are the ones kept');
    await other.stop();
  });

  await t.test('a record keeps at most 512 characters of the path', async (t) => {
    const long = `/api/custom/${'p'.repeat(1000)}`;
    const e = await createEndpoint(ts, { path: long });
    t.equal((await callEndpoint(ts, long, { token: admin })).status, 200);
    const [record] = await executionsOf(ts, e.id);
    t.equal(record.requestSummary.path, `${long.slice(0, 512)}…`);
  });
});
