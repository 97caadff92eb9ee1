// GET /metrics end to end: the exposition parses strictly, its counters move after a publish, a check and
// a GraphQL call, no label value carries an id, a token or a secret, the switch and the own address work,
// and the Grafana dashboard asks only for metrics the service exposes.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import path from 'node:path';
import t from 'tap';
import { loadServices, serviceOf } from '../../src/grpc/server.js';
import { projectRoot } from '../../src/paths.js';
import { ADMIN_SECRET, AUTH_ENV, adminToken } from '../helpers/auth.js';
import { gql, startTestService, type TestService } from '../helpers/service.js';
import { publish, world } from '../messaging/helpers.js';
import { parseExposition, type Exposition } from './exposition.js';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

async function scrape(base: string): Promise<Exposition> {
  const res = await fetch(`${base}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  if (!/^text\/plain; version=0\.0\.4/.test(res.headers.get('content-type') ?? '')) throw new Error(`content-type ${res.headers.get('content-type')}`);
  return parseExposition(await res.text());
}

// Every protocol on: their metric families are declared, so the dashboard check sees all of them.
const ts: TestService = await startTestService(t, {
  ...AUTH_ENV, SVC_MQTT_ADDR: '127.0.0.1:0', SVC_COAP_ADDR: '127.0.0.1:0', SVC_GRPC_ADDR: '127.0.0.1:0',
});
const a = await world(ts, 'ws-metrics');
const token = await adminToken(ts);

t.test('the exposition parses and every family has HELP and TYPE', async (t) => {
  const m = await scrape(ts.url());
  for (const family of ['svc_http_requests_total', 'svc_http_request_duration_seconds', 'svc_graphql_operations_total', 'svc_authz_decisions_total',
    'svc_authz_decision_cache_lookups_total', 'svc_ingest_batch_rows', 'svc_ingest_commit_duration_seconds', 'svc_ingest_queue_depth',
    'svc_mqtt_connections', 'svc_coap_messages_total', 'svc_grpc_calls_total', 'svc_custom_endpoint_timeouts_total',
    'svc_custom_endpoint_statements_stopped_total', 'svc_custom_endpoint_execution_records_total', 'svc_worker_utilization', 'svc_db_connections',
    'svc_notify_reconnects_total', 'process_cpu_seconds_total', 'nodejs_eventloop_lag_seconds']) {
    t.ok(m.families.has(family), `${family} is declared`);
  }
  for (const f of m.families.values()) t.not(f.help, '', `${f.name} has a HELP text`);
  t.equal(m.families.get('svc_http_request_duration_seconds')?.type, 'histogram');
  t.equal(m.families.get('svc_authz_decisions_total')?.type, 'counter');
  t.equal(m.value('svc_notify_connected'), 1, 'the LISTEN connection is up');
  t.ok((m.sum('svc_db_connections', { pool: 'svc' }) ?? 0) >= 1, 'the main pool shows in pg_stat_activity');
  t.equal(m.value('svc_db_pool_max_connections', { pool: 'svc' }), ts.service.config.database.poolMax);
});

t.test('a publish moves the HTTP, ingest and authz series', async (t) => {
  const route = { listener: 'messaging', method: 'POST', route: '/http/m/:ws/c/:ch', status: '2xx' };
  const before = await scrape(ts.url());
  const res = await publish(ts, a.ws, a.channel, a.publisher.key, [{ n: 'temp', v: 21 }, { n: 'hum', v: 40 }]);
  t.equal(res.status, 202);
  const after = await scrape(ts.url());
  const delta = (name: string, labels?: Record<string, string>) => after.sum(name, labels) - before.sum(name, labels);
  t.equal(delta('svc_http_requests_total', route), 1, 'one 2xx on the publish route');
  t.equal(delta('svc_http_request_duration_seconds_count', { listener: 'messaging', method: 'POST', route: '/http/m/:ws/c/:ch' }), 1, 'one latency observation');
  t.equal(delta('svc_ingest_publishes_total', { outcome: 'acknowledged' }), 1, 'one acknowledged publish');
  t.equal(delta('svc_ingest_messages_stored_total'), 2, 'its two records stored');
  t.equal(delta('svc_ingest_batch_rows_count'), 1, 'in one batch');
  t.equal(delta('svc_ingest_batch_rows_sum'), 2, 'of two rows');
  t.equal(delta('svc_ingest_commit_duration_seconds_count'), 1, 'one commit timed');
  t.ok(delta('svc_authz_decisions_total', { outcome: 'allow' }) >= 1, 'the publish decision was counted');
  t.ok(delta('svc_authz_decision_cache_lookups_total') >= 1, 'and looked up in the decision cache');

  const refused = await publish(ts, a.ws, a.channel, 'not-a-key', [{ n: 'temp', v: 1 }]);
  t.equal(refused.status, 401);
  const third = await scrape(ts.url());
  t.equal(third.sum('svc_http_requests_total', { ...route, status: '4xx' }) - after.sum('svc_http_requests_total', { ...route, status: '4xx' }), 1, 'a refusal counts as 4xx');
});

t.test('an authz check moves the check, decision and cache series', async (t) => {
  const body = JSON.stringify({ subject_id: a.publisher.id, action: 'publish', resource_id: a.channel });
  const check = () => fetch(`${ts.url()}/authz/check`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
  const before = await scrape(ts.url());
  const first = await check();
  t.same(await first.json(), { allowed: true, reason: 'allowed' });
  const second = await check();
  t.equal(second.status, 200);
  await second.arrayBuffer();
  const after = await scrape(ts.url());
  const delta = (name: string, labels?: Record<string, string>) => after.sum(name, labels) - before.sum(name, labels);
  t.equal(delta('svc_authz_checks_total', { outcome: 'allow' }), 2, 'two allowed runtime checks');
  t.equal(delta('svc_authz_checks_total', { outcome: 'deny' }), 0);
  t.ok(delta('svc_authz_decisions_total', { outcome: 'allow' }) >= 2, 'decisions counted');
  t.ok(delta('svc_authz_decision_cache_lookups_total', { result: 'hit' }) >= 1, 'the second check was a cache hit');
  t.equal(delta('svc_http_requests_total', { listener: 'http', method: 'POST', route: '/authz/check', status: '2xx' }), 2);

  const denied = await fetch(`${ts.url()}/authz/check`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ subject_id: a.publisher.id, action: 'delete', resource_id: a.channel }),
  });
  t.equal(((await denied.json()) as { allowed: boolean }).allowed, false);
  const third = await scrape(ts.url());
  t.equal(third.sum('svc_authz_checks_total', { outcome: 'deny' }) - after.sum('svc_authz_checks_total', { outcome: 'deny' }), 1, 'a denial counts as deny');
});

t.test('a GraphQL call moves its operation series; unknown names collapse', async (t) => {
  const before = await scrape(ts.url());
  const named = await gql(ts.url(), 'query MetricsProbe { __typename }', undefined, token);
  t.same(named.body.data, { __typename: 'Query' });
  await gql(ts.url(), '{ __typename }', undefined, token);
  await gql(ts.url(), 'query Broken { noSuchField }', undefined, token);
  const after = await scrape(ts.url());
  const delta = (name: string, labels?: Record<string, string>) => after.sum(name, labels) - before.sum(name, labels);
  t.equal(delta('svc_graphql_operations_total', { operation: 'MetricsProbe', type: 'query', outcome: 'ok' }), 1, 'the named query');
  t.equal(delta('svc_graphql_operations_total', { operation: 'anonymous', type: 'query', outcome: 'ok' }), 1, 'the anonymous one');
  t.equal(delta('svc_graphql_rejected_total'), 1, 'the invalid one was refused before execution');
  t.equal(after.series.filter((s) => s.labels.operation === 'Broken').length, 0, 'a refused document names no series');
  t.equal(delta('svc_http_requests_total', { listener: 'http', method: 'POST', route: '/graphql', status: '2xx' }), 3);
});

t.test('gRPC calls count by method and status code', async (t) => {
  const Client = serviceOf(loadServices(), 'AuthzService');
  const client = new Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure()) as any;
  t.teardown(() => client.close());
  const call = (authorization?: string) => new Promise<grpc.ServiceError | null>((resolve) => {
    const md = new grpc.Metadata();
    if (authorization) md.set('authorization', authorization);
    client.Check({ subject_id: a.publisher.id, action: 'publish', resource_id: a.channel }, md, (err: grpc.ServiceError | null) => resolve(err));
  });
  const before = await scrape(ts.url());
  t.equal(await call(`Bearer ${token}`), null);
  t.equal((await call())?.code, grpc.status.UNAUTHENTICATED);
  const after = await scrape(ts.url());
  const delta = (labels: Record<string, string>) => after.sum('svc_grpc_calls_total', labels) - before.sum('svc_grpc_calls_total', labels);
  t.equal(delta({ method: 'AuthzService.Check', code: 'OK' }), 1);
  t.equal(delta({ method: 'AuthzService.Check', code: 'UNAUTHENTICATED' }), 1);
  t.equal(after.sum('svc_authz_checks_total', { outcome: 'allow' }) - before.sum('svc_authz_checks_total', { outcome: 'allow' }), 1, 'a gRPC check is a runtime check');
});

t.test('no label value carries an id, a token or a secret', async (t) => {
  // Paths full of ids and secrets: a reader page, an unknown path with a UUID, a key in the query string.
  await fetch(`${ts.url('reader')}/${a.ws}/channels/${a.channel}/messages`, { headers: { authorization: `Client ${a.publisher.key}` } });
  await fetch(`${ts.url()}/no/such/${a.publisher.id}?token=${token}`);
  await fetch(`${ts.url('messaging')}/http/m/${a.ws}/c/${a.channel}/sub/${a.publisher.id}?auth=${a.publisher.key}`, {
    method: 'POST', headers: { authorization: `Client ${a.publisher.key}`, 'content-type': 'application/senml+json' }, body: '[{"n":"x","v":1}]',
  });
  await fetch(`${ts.url()}/auth/sessions/${a.publisher.id}`, { headers: { authorization: `Bearer ${token}` } });
  await gql(ts.url(), `query Q_${a.publisher.id.replace(/-/g, '_')} { __typename }`, undefined, token);
  const m = await scrape(ts.url());
  const secrets = [token, a.publisher.key, ADMIN_SECRET, a.ws, a.channel, a.publisher.id, a.publisher.id.replace(/-/g, '_'), a.publisher.id.slice(0, 8)];
  let checked = 0;
  for (const s of m.series) {
    for (const [name, value] of Object.entries(s.labels)) {
      checked++;
      if (UUID.test(value)) t.fail(`${s.name}{${name}="${value}"} carries a UUID`);
      for (const secret of secrets) if (value.includes(secret)) t.fail(`${s.name}{${name}="${value}"} carries a secret or id`);
      if (/[0-9a-f]{32,}/i.test(value) || /eyJ[A-Za-z0-9_-]{10,}/.test(value)) t.fail(`${s.name}{${name}="${value}"} looks like a key or a token`);
    }
  }
  t.ok(checked > 100, `${checked} label values swept`);
  const routes = new Set(m.series.filter((s) => s.name === 'svc_http_requests_total').map((s) => s.labels.route));
  t.ok(routes.has('/:ws/channels/:ch/messages'), 'the reader route by its pattern');
  t.ok(routes.has('/*'), 'the unknown path under the catch-all pattern');
  t.ok(routes.has('/auth/sessions/:id'), 'a route with an id parameter by its pattern');
  t.ok(m.series.some((s) => s.name === 'svc_graphql_operations_total' && s.labels.operation === 'other'), 'the id-named operation counted as other');
});

t.test('the Grafana dashboard asks only for metrics /metrics exposes', async (t) => {
  const dashboard = JSON.parse(readFileSync(path.join(projectRoot, 'docs/grafana-dashboard.json'), 'utf8'));
  t.type(dashboard.schemaVersion, 'number', 'schemaVersion');
  t.ok(Array.isArray(dashboard.panels) && dashboard.panels.length >= 8, 'panels');
  const m = await scrape(ts.url());
  const exposed = new Set<string>();
  for (const f of m.families.values()) {
    exposed.add(f.name);
    if (f.type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(f.name + suffix);
  }
  const exprs: string[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels) {
      for (const target of p.targets ?? []) exprs.push(target.expr);
      if (p.panels) walk(p.panels);
    }
  };
  walk(dashboard.panels);
  t.ok(exprs.length >= 10, `${exprs.length} PromQL targets`);
  const PROMQL_WORDS = new Set(['sum', 'rate', 'irate', 'increase', 'by', 'without', 'histogram_quantile', 'le', 'max', 'min', 'avg', 'clamp_min',
    'clamp_max', 'topk', 'count', 'on', 'ignoring', 'group_left', 'or', 'and', 'unless', 'vector', 'bool', 'offset', 'abs', 'time']);
  let referenced = 0;
  for (const expr of exprs) {
    t.type(expr, 'string');
    // Identifiers outside label matchers and range brackets: functions, keywords, grouping labels, metric names.
    const bare = expr.replace(/\{[^}]*\}/g, '').replace(/\[[^\]]*\]/g, '').replace(/"[^"]*"/g, '')
      .replace(/(?<![a-zA-Z0-9_:])\d[\d.]*(?:e[-+]?\d+)?/gi, '');
    const grouping = [...expr.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g)].flatMap((g) => (g[1] as string).split(',').map((s) => s.trim()));
    for (const [word] of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
      if (PROMQL_WORDS.has(word) || grouping.includes(word) || /^\d/.test(word)) continue;
      referenced++;
      t.ok(exposed.has(word), `${word} (in ${expr}) is exposed`);
    }
  }
  t.ok(referenced >= 10, `${referenced} metric references checked`);
});

t.test('metrics disabled: /metrics answers 404 and nothing is timed', async (t) => {
  const off = await startTestService(t, { ...AUTH_ENV, SVC_METRICS_ENABLED: 'false' });
  const res = await fetch(`${off.url()}/metrics`);
  t.equal(res.status, 404);
  await res.arrayBuffer();
  t.equal(off.service.metrics, undefined);
});

t.test('own address: /metrics is served there and not on the management listener', async (t) => {
  const own = await startTestService(t, { ...AUTH_ENV, SVC_METRICS_ADDR: '127.0.0.1:0' });
  t.type(own.service.ports.metrics, 'number');
  const onHttp = await fetch(`${own.url()}/metrics`);
  t.equal(onHttp.status, 404, 'not on the management listener');
  await onHttp.arrayBuffer();
  await gql(own.url(), 'query OwnProbe { __typename }');
  const m = await scrape(own.url('metrics'));
  t.equal(m.value('svc_graphql_operations_total', { operation: 'OwnProbe', type: 'query', outcome: 'ok' }), 1);
  t.equal(m.sum('svc_http_requests_total', { listener: 'http', route: '/graphql' }), 1, 'the management listener is still measured');
});
