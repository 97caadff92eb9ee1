// Hostile input everywhere: every GraphQL query and mutation called by the platform administrator with
// well-typed but hostile arguments (NUL, lone surrogates, long and empty strings, LIKE and path
// metacharacters, ids that are no UUID or name nothing, extreme numbers, deep and odd JSON), the gRPC
// check with the same strings and odd metadata, and every HTTP route with malformed paths, bodies and
// headers. Whatever the answer, it is never INTERNAL or a 5xx, and the service keeps serving. (This is
// how the NUL, lone-surrogate and percent-escape defects were found; each has its own test too.)
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import {
  buildClientSchema, getIntrospectionQuery, getNamedType, isCompositeType, isEnumType, isInputObjectType, isListType, isNonNullType,
  type GraphQLField, type GraphQLInputType, type IntrospectionQuery,
} from 'graphql';
import t from 'tap';
import { loadServices, serviceOf } from '../../src/grpc/server.js';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';

const STRINGS = ['a\u0000b', 'x\ud800', 'z'.repeat(5000), '%_\\', '\'"', '', '{}', '../../etc/passwd'];
const INTS = [2147483647, -2147483648, 0, -1];
const FLOATS = [1e308, -0, 0.5];
const JSONS: unknown[] = [{ '\u0000': 'x\ud800' }, JSON.parse(`${'['.repeat(200)}${']'.repeat(200)}`), { a: 'v'.repeat(100_000) }, 'str', 12, null];
const VARIANTS = 8;
// Fields that would end the administrator's own session for the calls after them.
const SKIPPED = new Set(['logout']);

// It sweeps every GraphQL field, gRPC method and HTTP route: on a loaded 2-core runner that can take
// longer than the suite's 120 s per file.
t.setTimeout(300_000);
const ts = await startTestService(t, { ...AUTH_ENV, SVC_GRAPHQL_INTROSPECTION_ENABLED: 'true', SVC_GRPC_ADDR: '127.0.0.1:0' });
const admin = await adminToken(ts);

t.test('every GraphQL field, hostile but well-typed arguments: never INTERNAL', async (t) => {
  const introspection = await gql(ts.url(), getIntrospectionQuery(), {}, admin);
  const schema = buildClientSchema(introspection.body.data as unknown as IntrospectionQuery);
  const tenant = (await gql(ts.url(), 'mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id } }', { i: { name: 'hostile', alias: 'hostile' } }, admin)).body.data?.createTenant.id as string;
  const ids = ['not-a-uuid', '00000000-0000-0000-0000-000000000000', tenant, '%zz', 'a\u0000'];

  function valueFor(type: GraphQLInputType, k: number, depth = 0): unknown {
    if (isNonNullType(type)) return valueFor(type.ofType, k, depth);
    if (isListType(type)) return [valueFor(type.ofType, k, depth)];
    const named = getNamedType(type);
    if (isEnumType(named)) {
      const values = named.getValues();
      return (values[k % values.length] as { name: string }).name;
    }
    if (isInputObjectType(named)) {
      if (depth > 3) return null;
      return Object.fromEntries(Object.values(named.getFields()).map((f) => [f.name, valueFor(f.type, k, depth + 1)]));
    }
    switch (named.name) {
      case 'ID': return ids[k % ids.length];
      case 'Int': return INTS[k % INTS.length];
      case 'Float': return FLOATS[k % FLOATS.length];
      case 'Boolean': return k % 2 === 0;
      case 'JSON': return JSONS[k % JSONS.length];
      default: return STRINGS[k % STRINGS.length];
    }
  }

  const failures: string[] = [];
  const answered: Record<string, number> = {};
  const roots: Array<['query' | 'mutation', Record<string, GraphQLField<unknown, unknown>>]> = [
    ['query', schema.getQueryType()?.getFields() ?? {}],
    ['mutation', schema.getMutationType()?.getFields() ?? {}],
  ];
  for (const [operation, fields] of roots) {
    for (const field of Object.values(fields)) {
      if (SKIPPED.has(field.name)) continue;
      const defs = field.args.map((a) => `$${a.name}: ${String(a.type)}`).join(', ');
      const args = field.args.map((a) => `${a.name}: $${a.name}`).join(', ');
      const selection = isCompositeType(getNamedType(field.type)) ? ' { __typename }' : '';
      const query = `${operation}${defs ? ` (${defs})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
      for (let k = 0; k < VARIANTS; k++) {
        const variables = Object.fromEntries(field.args.map((a) => [a.name, valueFor(a.type, k)]));
        const res = await gql(ts.url(), query, variables, admin);
        const codes = (res.body.errors ?? []).map((e) => String(e.extensions?.code));
        for (const code of codes.length ? codes : ['OK']) answered[code] = (answered[code] ?? 0) + 1;
        if (res.status >= 500 || codes.includes('INTERNAL')) {
          failures.push(`${field.name} #${k}: ${res.status} ${(res.body.errors ?? []).map((e) => e.message).join('; ')}`);
        }
      }
    }
  }
  t.same(failures, [], 'no field answered INTERNAL or 5xx');
  t.ok((answered.OK ?? 0) > 50 && (answered.BAD_REQUEST ?? 0) > 100, `resolvers were reached, not only validation: ${JSON.stringify(answered)}`);
  const live = await fetch(`${ts.url()}/health/live`);
  t.equal(live.status, 200, 'still serving');
});

t.test('gRPC AuthzService.Check with hostile fields and metadata: never INTERNAL or UNKNOWN', async (t) => {
  const Client = serviceOf(loadServices(), 'AuthzService');
  const client = new Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure()) as unknown as {
    Check(req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null) => void): void; close(): void;
  };
  t.teardown(() => client.close());
  const uuid = '00000000-0000-4000-8000-000000000000';
  const authorizations = [`Bearer ${admin}`, 'Bearer %zz', `Bearer ${'x'.repeat(10_000)}`, 'Basic Zm9v', ''];
  const failures: string[] = [];
  for (const authorization of authorizations) {
    for (let k = 0; k < STRINGS.length; k++) {
      const text = STRINGS[k] as string;
      const requests = [
        { subject_id: text, action: 'read', resource_id: uuid },
        { subject_id: uuid, action: text, resource_id: uuid, context: { [text]: text } },
        { subject_id: uuid, action: 'read', object_kind: text, object_id: text },
        { subject_id: uuid, action: 'read', object_kind: 'platform', object_id: text, resource_id: text },
      ];
      for (const req of requests) {
        const md = new grpc.Metadata();
        if (authorization) md.set('authorization', authorization);
        const err = await new Promise<grpc.ServiceError | null>((resolve) => client.Check(req, md, (e) => resolve(e)));
        if (err && (err.code === grpc.status.INTERNAL || err.code === grpc.status.UNKNOWN)) failures.push(`${JSON.stringify(req).slice(0, 80)}: ${err.code} ${err.details}`);
      }
    }
  }
  t.same(failures, [], 'no INTERNAL or UNKNOWN');
});

t.test('every HTTP route, malformed paths, bodies and headers: never a 5xx, never down', async (t) => {
  const routes = [
    'GET /.well-known/jwks.json', 'GET /x/channels/y/messages', 'GET /%zz/channels/%E0%A4%A/messages', 'GET /x/channels/y/messages?limit=%zz&offset=-1&from=abc',
    'GET /audit/export?from=%zz&limit=-1', 'GET /auth/email/verify?token=%zz', 'GET /auth/introspect', 'GET /auth/public-config', 'GET /auth/session',
    'GET /auth/sessions/%zz', 'GET /auth/sessions/abc', 'GET /health', 'POST /auth/email/resend', 'POST /auth/email/verify', 'POST /auth/keys/rotate',
    'POST /auth/login', 'POST /auth/signup', 'POST /authz/check', 'POST /authz/check/bulk', 'POST /authz/explain', 'POST /graphql',
    'POST /http/m/a/c/b', 'POST /http/m/a/c/b/sub%', 'POST /http/m/%zz/c/b/x%E0',
  ];
  const bodies: Array<string | Buffer> = ['', '{', '[]', 'null', '"x"', '{"query":1}', '{"subject_id":[],"action":{},"resource_id":1}', Buffer.from([0xff, 0xfe, 0x00, 0x7b]),
    `{"a":${'['.repeat(5000)}`, JSON.stringify({ identifier: 'x'.repeat(10_000), secret: 'y' }), '{"__proto__":{"x":1},"constructor":{"prototype":{}}}', '[{"n":"a\\u0000","v":1}]'];
  const headerSets: Record<string, string>[] = [{}, { 'content-type': 'application/json' }, { authorization: 'Bearer %zz' }, { authorization: `Client ${'k'.repeat(300)}` },
    { authorization: 'Basic Zm9vOmJhcg==' }, { 'content-type': 'application/senml+json; charset=%%' }, { cookie: 'session=%zz; a' }, { 'x-forwarded-for': 'not-an-ip, ,,' },
    { origin: 'http://%zz' }, { referer: '::::' }, { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }];
  const failures: string[] = [];
  for (const [listener, port] of Object.entries(ts.service.ports)) {
    if (!port || listener === 'mqtt' || listener === 'coap' || listener === 'grpc') continue;
    for (const route of routes) {
      const [method, path] = route.split(' ') as [string, string];
      // Each header set with a plain JSON body, and each body as JSON from an anonymous and an admin caller.
      const cases: Array<[Record<string, string>, string | Buffer]> = method === 'GET'
        ? headerSets.map((h) => [h, ''])
        : [...headerSets.map((h): [Record<string, string>, string | Buffer] => [h, '{}']),
          ...bodies.flatMap((b): Array<[Record<string, string>, string | Buffer]> => [[headerSets[1] as Record<string, string>, b], [headerSets.at(-1) as Record<string, string>, b]])];
      for (const [headers, body] of cases) {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers, body: method === 'POST' ? body : undefined });
        await res.arrayBuffer();
        if (res.status >= 500) failures.push(`${listener} ${route} ${JSON.stringify(headers).slice(0, 40)} ${String(body).slice(0, 30)}: ${res.status}`);
      }
    }
    for (const raw of ['GET /health%zz HTTP/1.1\r\nHost: x\r\n\r\n', 'POST /graphql HTTP/1.1\r\nContent-Length: -5\r\n\r\n', 'POST /graphql HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      '\x00\x01\x02\r\n\r\n', `GET / HTTP/1.1\r\n${'X: y\r\n'.repeat(500)}\r\n`]) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(raw));
        // Any answer will do (uWS closes on what it cannot parse): the point is the process surviving.
        socket.on('data', () => socket.destroy());
        socket.on('close', () => resolve());
        socket.on('error', () => resolve());
        socket.setTimeout(1000, () => socket.destroy());
      });
    }
  }
  // Last: logout with the administrator's token ends the session every case above used.
  for (const headers of headerSets) {
    for (const body of bodies) {
      const res = await fetch(`${ts.url()}/auth/logout`, { method: 'POST', headers, body });
      await res.arrayBuffer();
      if (res.status >= 500) failures.push(`POST /auth/logout ${JSON.stringify(headers).slice(0, 40)} ${String(body).slice(0, 30)}: ${res.status}`);
    }
  }
  t.same(failures, [], 'no 5xx');
  const live = await fetch(`${ts.url()}/health/live`);
  t.equal(live.status, 200, 'still serving');
});
