// Issue 35 point 1: the tenant-isolation matrix, generated from the live service. One instance, one
// fixture world (world.ts): every GraphQL query and mutation that takes an object or tenant id (found by
// introspection, arguments from graphql-fixtures.ts), every gRPC method of the atom.v1 proto, every HTTP
// route the listeners registered (REST, ingest, reader, custom endpoints, enrollment and EST), asked by the
// other tenant's admin, a read-only member, a device, a scoped token outside its ceiling and an anonymous
// caller: all refused; nothing of the target tenant returned or counted; the target's rows, audit log
// and certificates hashed before and after each operation (snapshot.ts) and unchanged. The one thing a
// refused attempt may add is a record of it: a `deny` entry in the target's audit log (a login into the
// target, for one), a `denied` call in its custom endpoint's execution log; its administrators see who tried. An operation or
// route without a fixture row fails the test, so the matrix grows with the service.
import t, { type Test } from 'tap';
import { AUTH_ENV } from '../../helpers/auth.js';
import { enrollmentEnv } from '../../helpers/enrollment.js';
import { makeCaFiles } from '../../helpers/pki.js';
import { startTestService } from '../../helpers/service.js';
import { coverage, liveSchema, operationsOf, probeOperation, type Operation } from './graphql-matrix.js';
import { GRAPHQL } from './graphql-fixtures.js';
import { HTTP } from './http-fixtures.js';
import { GRPC, grpcMethods, httpsAgent, probeMethod, probeRoute, routeCoverage, routeKey, servedRoutes } from './surfaces.js';
import { KNOWN_ORACLES } from './known-oracles.js';
import { probeTopics } from './messaging-topics.js';
import { oraclesOf } from './judge.js';
import { changedTables, snapshot, tablesWithoutLine } from './snapshot.js';
import { buildWorld } from './world.js';

// The budget is about two minutes on an idle 2-core machine; the limit leaves room for a loaded one.
t.setTimeout(600_000);
const started = Date.now();
const ca = makeCaFiles(t);
const { env, serverCert } = await enrollmentEnv(ca, { SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
const ts = await startTestService(t, {
  ...AUTH_ENV, ...env,
  SVC_GRPC_ADDR: '127.0.0.1:0',
  SVC_MQTT_ADDR: '127.0.0.1:0',
  SVC_COAP_ADDR: '127.0.0.1:0',
  // One operation's login rows and their twins are a dozen failed logins of one identity from one address:
  // the throttle (test/auth) must not decide their answers here.
  SVC_LOGIN_FAILURE_LIMIT: '1000',
  SVC_LOGIN_IDENTIFIER_FAILURE_LIMIT: '100000',
  SVC_LOGIN_FAILURE_IP_LIMIT: '100000',
  SVC_GRAPHQL_INTROSPECTION_ENABLED: 'true',
  SVC_KEY_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
});
const sql = ts.service.sql;
const world = await buildWorld(ts, ca.dir);
const tenant = world.target.tenant as string;
t.comment(`world built in ${Date.now() - started} ms`);

// Everything awaited at the top level comes before the first subtest (tap ends the file's test otherwise).
const schema = await liveSchema(ts, world.platformAdmin);
const ops = operationsOf(schema);
const missingTables = await tablesWithoutLine(sql);
await ts.service.audit.flush();
let baseline = await snapshot(sql, tenant);
/** Compares with the last snapshot and moves it on, so one change is blamed on one operation. */
async function unchanged(): Promise<string[]> {
  // Audit events are written in batches: flushed first, so each lands with the operation that caused it.
  await ts.service.audit.flush();
  await ts.service.customEndpoints.executions.flush();
  const now = await snapshot(sql, tenant);
  const changed = changedTables(baseline, now);
  baseline = now;
  if (changed.includes('audit_log')) {
    const rows = await sql`select event, outcome, actor_entity_id, details from audit_log where tenant_id = ${tenant} and outcome <> 'deny'
      order by created_at desc limit 3`;
    changed.push(...rows.map((r) => `audit entry ${r.event} ${r.outcome} by ${r.actor_entity_id}: ${JSON.stringify(r.details).slice(0, 160)}`));
  }
  return changed;
}

/**
 * The existence-oracle verdict of one row: every refused caller's answer for the target's real object and for
 * a never-existing one must match; the callers that can still tell them apart must be exactly the row's
 * entry in known-oracles.ts (a new oracle fails, and so does an entry that no longer leaks: the list only
 * shrinks). The rest of the findings are returned.
 */
const oracleFindings: Record<string, string[]> = {};
function judgeOracles(t: Test, key: string, problems: string[]): string[] {
  const { callers, rest, examples } = oraclesOf(problems);
  if (callers.length) oracleFindings[key] = callers;
  const known = [...(KNOWN_ORACLES[key] ?? [])].sort();
  if (JSON.stringify(callers) !== JSON.stringify(known)) {
    t.same(callers, known, `${key}: callers that tell an existing object from a missing one (known-oracles.ts)`, { examples });
  }
  return rest;
}

/**
 * Failed logins are throttled per identity and address: the login rows (and their twins) would otherwise
 * reach a limit and answer RATE_LIMITED in whatever order the calls land. Each operation starts with none.
 */
async function resetLoginThrottle(): Promise<void> {
  await sql`delete from auth_login_failures`;
}

t.test('every table of the schema is accounted for in the snapshot', async (t) => {
  t.same(missingTables, [], 'a new table needs a line in snapshot.ts (the target\'s rows, or why it holds none)');
});


t.test('GraphQL: every operation has a fixture row', async (t) => {
  const c = coverage(ops);
  t.same(c.missing, [], 'operations taking an id without a row in graphql-fixtures.ts GRAPHQL');
  t.same(c.unclassified, [], 'operations taking no id, not listed in NO_IDS');
  t.same(c.stale, [], 'rows for operations the schema no longer has');
  t.same(c.misfiled, [], 'NO_IDS operations that do take an id');
});

// Read first; among writes, the ones that would end the world if they slipped through go last.
const LAST = /^(purge|delete|disable|freeze|revoke|bulkRevoke|remove|clear|complete|transition|beginAuthority)/;
const order = (o: Operation) => (o.root === 'query' ? 0 : LAST.test(o.field.name) ? 2 : 1);
const probed = ops.filter((o) => o.field.name in GRAPHQL)
  .sort((a, b) => order(a) - order(b) || a.field.name.localeCompare(b.field.name));

t.test('GraphQL: refused for every caller, nothing returned, counted or changed', async (t) => {
  let calls = 0;
  const t0 = Date.now();
  for (const op of probed) {
    await resetLoginThrottle();
    const result = await probeOperation(ts, world, op);
    calls += result.calls;
    const changed = await unchanged();
    t.same([...judgeOracles(t, `graphql ${op.field.name}`, result.problems), ...changed.map((c) => `changed: ${c}`)], [], `${op.root} ${op.field.name} (${result.calls} calls)`);
  }
  t.comment(`${probed.length} operations, ${calls} calls in ${Date.now() - t0} ms`);
});

const routes = servedRoutes(ts.service.routes());
const tls = httpsAgent(serverCert);
t.teardown(() => tls.close());

t.test('HTTP: every route of every listener has a fixture row', async (t) => {
  const c = routeCoverage(routes);
  t.same(c.missing, [], 'routes without a row in http-fixtures.ts');
  t.same(c.stale, [], 'rows for routes no listener serves');
  t.ok(routes.some((r) => r.listener === 'enrollment'), 'the enrollment listener is part of it');
});

t.test('HTTP: refused for every caller, nothing returned, counted or changed', async (t) => {
  let calls = 0;
  const t0 = Date.now();
  for (const route of routes.filter((r) => HTTP[routeKey(r)])) {
    await resetLoginThrottle();
    const result = await probeRoute(ts, world, route, tls);
    calls += result.calls;
    const changed = await unchanged();
    t.same([...judgeOracles(t, routeKey(route), result.problems), ...changed.map((c) => `changed: ${c}`)], [], `${routeKey(route)} (${result.calls} calls)`);
  }
  t.comment(`${routes.length} routes, ${calls} calls in ${Date.now() - t0} ms`);
});

t.test('gRPC: every method of the proto has a row; refused for every caller, nothing changed', async (t) => {
  const methods = grpcMethods();
  t.same(methods.filter((m) => !GRPC[m]), [], 'methods without a row in surfaces.ts GRPC');
  t.same(Object.keys(GRPC).filter((m) => !methods.includes(m)), [], 'rows for methods the proto no longer has');
  for (const method of methods.filter((m) => GRPC[m])) {
    await resetLoginThrottle();
    const result = await probeMethod(ts, world, method);
    const changed = await unchanged();
    t.same([...judgeOracles(t, `grpc ${method}`, result.problems), ...changed.map((c) => `changed: ${c}`)], [], `${method} (${result.calls} calls)`);
  }
});

t.test('MQTT and CoAP: the other tenant\'s device cannot publish to, subscribe to or observe the target\'s channels', async (t) => {
  const t0 = Date.now();
  const result = await probeTopics(ts, world, async () => {
    t.same((await unchanged()).map((c) => `changed: ${c}`), [], 'nothing of the target stored or changed by the attempts');
  });
  t.same(result.problems, [], `${result.targets} target channels, ${result.calls} attempts and controls`);
  // The controls published one message of the target's own: the next comparison starts after it.
  await unchanged();
  t.ok(result.targets >= 2, 'the target has channels to aim at');
  t.comment(`${result.calls} MQTT and CoAP calls in ${Date.now() - t0} ms`);
});

t.test('existence oracles: the known list names only rows that still leak', async (t) => {
  const stale = Object.keys(KNOWN_ORACLES).filter((k) => !oracleFindings[k]);
  t.same(stale, [], 'rows of known-oracles.ts that no longer tell an existing object from a missing one: remove them');
  if (process.env.MATRIX_PRINT_ORACLES) t.comment(JSON.stringify(oracleFindings, null, 1));
});

t.test('the whole matrix stays within its budget', async (t) => {
  t.comment(`total ${Date.now() - started} ms (world, GraphQL, HTTP, gRPC)`);
  t.pass();
});
