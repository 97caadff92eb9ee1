// The execution log: secrets redacted at any depth and in any letter case from both summaries, records
// bounded in size, written off the request path (a call never waits for its record).
import postgres from 'postgres';
import t from 'tap';
import { createExecutionLog } from '../../src/custom-endpoints/execution-log.js';
import { migratedDatabase } from '../helpers/migrated.js';
import { testLogger } from '../helpers/service.js';
import { REDACTED, isSensitiveKey, redact, summaryText } from '../../src/custom-endpoints/redaction.js';
import { adminToken, insertTenant, startAuthService } from '../helpers/auth.js';
import { callEndpoint, createEndpoint, executionsOf } from './helpers.js';

t.test('redaction: the seven keys, as parts of longer keys, in any case, at any depth, in arrays', async (t) => {
  for (const key of ['password', 'secret', 'token', 'authorization', 'apikey', 'api_key', 'api-key', 'PassWord', 'SECRET', 'Token',
    'Authorization', 'ApiKey', 'API_KEY', 'Api-Key', 'newPassword', 'client_secret', 'accessToken', 'x-api-key']) {
    t.ok(isSensitiveKey(key), key);
  }
  for (const key of ['name', 'toke', 'key', 'pass', 'auth', 'api']) t.notOk(isSensitiveKey(key), key);
  const value = {
    name: 'keep',
    level1: { Password: 'p1', level2: { items: [{ API_KEY: 'k1', keep: 1 }, { deeper: { level4: { 'Api-Key': 'k2', Secret: { nested: 'whole subtree' } } } }] } },
    token: ['t1', 't2'],
  };
  t.same(redact(value), {
    name: 'keep',
    level1: { Password: REDACTED, level2: { items: [{ API_KEY: REDACTED, keep: 1 }, { deeper: { level4: { 'Api-Key': REDACTED, Secret: REDACTED } } }] } },
    token: REDACTED,
  });
  t.same(value.level1.Password, 'p1', 'the original is not changed');
  t.same(redact({ text: 'a\u0000b', lone: '\ud800' }), { text: 'a\uFFFDb', lone: '\uFFFD' }, 'text PostgreSQL can store');
  let deep: Record<string, unknown> = { password: 'x' };
  for (let i = 0; i < 200; i++) deep = { d: deep };
  t.notMatch(JSON.stringify(redact(deep)), /"x"/, 'a body nested deeper than the walk goes is cut, not copied');
  const big = JSON.parse(summaryText({ blob: 'x'.repeat(50_000), password: 'hunter2' }, 1024)) as { truncated: boolean; bytes: number; preview: string };
  t.equal(big.truncated, true);
  t.ok(big.bytes > 50_000);
  t.ok(big.preview.length <= 512);
  t.notMatch(JSON.stringify(big), /hunter2/, 'the preview is of the redacted value');
});

t.test('execution records: redacted at depth, bounded, not waited for', async (t) => {
  const ts = await startAuthService(t, { SVC_CUSTOM_ENDPOINT_LOG_SUMMARY_MAX_BYTES: '4096' });
  const admin = await adminToken(ts);
  const tenant = await insertTenant(ts, 'shop');
  const e = await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/devices', operationKind: 'mutation',
    graphql: 'mutation ($input: CreateEntityInput!) { createEntity(input: $input) { name attributes } }',
  });
  const secrets = ['s3cr3t-one', 's3cr3t-two', 's3cr3t-three', 's3cr3t-four'];
  const body = {
    input: {
      name: 'dev-1', kind: 'device', tenantId: tenant,
      attributes: { Password: secrets[0], config: { mqtt: { ApiKey: secrets[1], hosts: [{ host: 'h1', 'api-key': secrets[2] }] } }, Authorization: secrets[3] },
    },
  };
  const res = await callEndpoint(ts, '/api/custom/devices', { token: admin, method: 'POST', body });
  t.equal(res.status, 200);
  t.equal(res.body.createEntity.attributes.config.mqtt.ApiKey, secrets[1], 'the caller gets its answer as it is');
  const [record] = await executionsOf(ts, e.id);
  const text = JSON.stringify(record);
  for (const s of secrets) t.notOk(text.includes(s), `${s} is not in the record`);
  t.same(record.requestSummary.variables.input.attributes, { Password: REDACTED, config: { mqtt: { ApiKey: REDACTED, hosts: [{ host: 'h1', 'api-key': REDACTED }] } }, Authorization: REDACTED });
  t.same(record.responseSummary.createEntity.attributes.config.mqtt.hosts, [{ host: 'h1', 'api-key': REDACTED }], 'the response summary too');

  // Carried as it is: tabs, newlines, backslashes, quotes, non-ASCII.
  const odd = 'tab\there\nnew line\\back\rslash "quoted" – ünïcödé 😀';
  const oddCall = await callEndpoint(ts, '/api/custom/devices', {
    token: admin, method: 'POST', body: { input: { name: 'dev-odd', kind: 'device', tenantId: tenant, attributes: { note: odd } } },
  });
  t.equal(oddCall.status, 200);
  const [oddRecord] = await executionsOf(ts, e.id);
  t.equal(oddRecord.requestSummary.variables.input.attributes.note, odd, 'kept exactly');
  t.equal(oddRecord.responseSummary.createEntity.attributes.note, odd);
  t.match(oddRecord.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a time-ordered (version 7) id');

  const large = await callEndpoint(ts, '/api/custom/devices', {
    token: admin, method: 'POST', body: { input: { name: 'dev-2', kind: 'device', tenantId: tenant, attributes: { blob: 'y'.repeat(12_000), token: 'tok-zzz' } } },
  });
  t.equal(large.status, 200);
  const [bounded] = await executionsOf(ts, e.id);
  t.match(bounded.requestSummary, { method: 'POST', path: '/api/custom/devices', variables: { truncated: true } });
  t.match(bounded.responseSummary, { truncated: true });
  t.ok(JSON.stringify(bounded).length < 8192, 'the record stays small');
  t.notOk(JSON.stringify(bounded).includes('tok-zzz'));

  // Off the request path: with the log's writes failing, calls are answered all the same.
  await ts.service.sql`alter table api_endpoint_executions rename to api_endpoint_executions_away`;
  const before = ts.service.customEndpoints.executions.stats.failures;
  const during = await callEndpoint(ts, '/api/custom/devices', { token: admin, method: 'POST', body: { input: { name: 'dev-3', kind: 'device', tenantId: tenant } } });
  t.equal(during.status, 200, 'answered while its record cannot be written');
  await ts.service.customEndpoints.executions.flush().catch(() => undefined);
  t.ok(ts.service.customEndpoints.executions.stats.failures > before, 'the write failed behind the call');
  await ts.service.sql`alter table api_endpoint_executions_away rename to api_endpoint_executions`;
  await ts.service.customEndpoints.executions.flush();
  const records = await executionsOf(ts, e.id);
  t.equal(records.length, 4, 'and is written once the table is back');
});

t.test('the batch writer: a record the database refuses is dropped alone', async (t) => {
  const { url, sql } = await migratedDatabase(t);
  const own = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => own.end());
  const log = createExecutionLog(own as never, { batchSize: 100, flushIntervalMs: 10, maxQueue: 1000, summaryMaxBytes: 4096 }, testLogger());
  const [endpoint] = await sql<{ id: string }[]>`
    insert into api_endpoints (key, name, method, path, operation_kind, graphql) values ('k', 'n', 'GET', '/api/custom/k', 'query', '{ health }') returning id`;
  const call = (endpointId: string | null, error: string | null = null) => ({ endpointId, callerEntityId: null, status: 'error' as const, method: 'GET', path: '/api/custom/k', variables: { a: 1 }, error });
  log.record(call(endpoint!.id, 'first'));
  log.record({ ...call(endpoint!.id, 'an unknown status: refused by its check'), status: 'lost' as never });
  log.record(call(null, 'multi\tline\nerror \\ text'));
  await log.flush();
  const rows = await sql<{ error: string }[]>`select error from api_endpoint_executions order by error`;
  t.same(rows.map((r) => r.error), ['first', 'multi\tline\nerror \\ text'], 'the refused record alone is dropped');
  t.equal(log.stats.dropped, 1);
  // An endpoint's records go with it (a purged tenant takes its endpoints along).
  await sql`delete from api_endpoints where id = ${endpoint!.id}`;
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from api_endpoint_executions where endpoint_id is not null`;
  t.equal(n, 0, 'deleted with the endpoint');

  await log.close();
});
