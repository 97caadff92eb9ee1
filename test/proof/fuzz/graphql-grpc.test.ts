// Generated hostile input (fast-check, FUZZ_SEED replays) for GraphQL and gRPC. GraphQL documents are built
// from the live schema (aliases, fragments, inline fragments, list limits, variables of every type) or from
// raw tokens, plus fragment chains whose naive expansion doubles at each level. Directly, thousands of them
// through the executor's check: never a throw, fragment bodies measured once each (the check is linear in
// the document), each check quick. Through the listener, hundreds executed by the platform administrator:
// never a 5xx or INTERNAL, no answer above SVC_ANSWER_MAX_BYTES, and a refused mutation document stores
// nothing. gRPC: every method of the proto called with random and mutated message bytes: never INTERNAL or
// UNKNOWN, and the service still answers.
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import {
  getNamedType, isCompositeType, isEnumType, isInputObjectType, isInterfaceType, isListType, isNonNullType, isObjectType, isScalarType, isUnionType, parse,
  type GraphQLField, type GraphQLInputType, type GraphQLNamedType, type GraphQLSchema,
} from 'graphql';
import t from 'tap';
import { checkDocument, scanQueryText } from '../../../src/graphql/limits.js';
import { loadServices, serviceOf } from '../../../src/grpc/server.js';
import { AUTH_ENV, adminToken } from '../../helpers/auth.js';
import { createEntity, createTenant } from '../../helpers/management.js';
import { gql, startTestService } from '../../helpers/service.js';
import { FUZZ_SEED, mutated, nastyJson, nastyString, params } from './fuzz.js';

// Low, so that generated documents reach it: the two entities' attributes are 8 KB each.
const ANSWER_MAX = 16_384;
// Three suites of generated cases against one service: on a loaded 2-core runner that can pass tap's 120 s per file.
t.setTimeout(300_000);
const ts = await startTestService(t, { ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0', SVC_ANSWER_MAX_BYTES: String(ANSWER_MAX), SVC_MESSAGING_MAX_MESSAGE_BYTES: String(ANSWER_MAX) });
const admin = await adminToken(ts);
const tenant = await createTenant(ts, admin, 'fuzz-gql', 'fuzz-gql');
const entities = [await createEntity(ts, admin, { kind: 'device', name: 'fuzz-d1', tenantId: tenant }), await createEntity(ts, admin, { kind: 'service', name: 'fuzz-s1', tenantId: tenant })];
await ts.service.sql`update entities set attributes = ${ts.service.sql.json({ blob: 'x'.repeat(8000), list: Array.from({ length: 200 }, (_, i) => i) })} where tenant_id = ${tenant}`;
const schema: GraphQLSchema = ts.service.graphql.schema;
const IDS = [tenant, ...entities, 'not-a-uuid', '00000000-0000-0000-0000-000000000000'];
const INTS = [0, 1, 2, 10, 100, 101, 10_000, -1, 2_147_483_647];

/** A document built from the schema, reading its choices from a stream of numbers (so fast-check shrinks it). */
function buildDocument(schema: GraphQLSchema, choices: number[], mutation: boolean): { query: string; variables: Record<string, unknown> } {
  let at = 0;
  const pick = (n: number) => (n <= 0 ? 0 : (choices[at++ % choices.length] ?? 0) % n);
  const variables: Record<string, unknown> = {};
  const defs: string[] = [];
  const fragments: string[] = [];
  let aliasCount = 0;

  function value(type: GraphQLInputType, depth: number): unknown {
    if (isNonNullType(type)) return value(type.ofType, depth);
    if (isListType(type)) return Array.from({ length: pick(3) }, () => value(type.ofType, depth + 1));
    const named = getNamedType(type);
    if (isEnumType(named)) return named.getValues()[pick(named.getValues().length)]!.name;
    if (isInputObjectType(named)) {
      if (depth > 3) return null;
      const out: Record<string, unknown> = {};
      for (const f of Object.values(named.getFields())) if (isNonNullType(f.type) || pick(3) === 0) out[f.name] = value(f.type, depth + 1);
      return out;
    }
    switch (named.name) {
      case 'ID': return IDS[pick(IDS.length)];
      case 'Int': return INTS[pick(INTS.length)];
      case 'Float': return [0, 1.5, -1, 1e300][pick(4)];
      case 'Boolean': return pick(2) === 0;
      case 'JSON': return [{}, { a: 1 }, 'x', [1, 2], null][pick(5)];
      default: return ['', 'fuzz', 'a\u0000b', 'x'.repeat(300), '%_'][pick(5)];
    }
  }

  function args(field: GraphQLField<unknown, unknown>): string {
    const given: string[] = [];
    for (const arg of field.args) {
      if (!isNonNullType(arg.type) && pick(3) !== 0) continue;
      const named = getNamedType(arg.type);
      if ((named.name === 'Int') && pick(2) === 0) {
        given.push(`${arg.name}: ${INTS[pick(INTS.length)]}`);
        continue;
      }
      const v = `v${defs.length}`;
      defs.push(`$${v}: ${String(arg.type)}`);
      variables[v] = value(arg.type, 0);
      given.push(`${arg.name}: $${v}`);
    }
    return given.length ? `(${given.join(', ')})` : '';
  }

  function selection(type: GraphQLNamedType, depth: number): string {
    if (isUnionType(type) || isInterfaceType(type)) {
      const possible = schema.getPossibleTypes(type);
      const on = possible[pick(possible.length)];
      return `{ __typename ${on ? `... on ${on.name} ${selection(on, depth)}` : ''} }`;
    }
    if (!isObjectType(type)) return '';
    const fields = Object.values(type.getFields());
    const parts: string[] = ['__typename'];
    for (let k = 1 + pick(4); k > 0; k--) {
      const field = fields[pick(fields.length)]!;
      const target = getNamedType(field.type);
      const composite = isCompositeType(target);
      if (composite && depth <= 0) continue;
      const alias = pick(4) === 0 ? `a${aliasCount++}: ` : '';
      const inner = composite ? selection(target, depth - 1) : '';
      if (composite && pick(5) === 0 && isObjectType(target)) {
        const name = `F${fragments.length}`;
        fragments.push(`fragment ${name} on ${target.name} ${inner}`);
        parts.push(`${alias}${field.name}${args(field)} { ...${name} ...${name} }`);
      } else {
        parts.push(`${alias}${field.name}${args(field)} ${inner}`);
      }
    }
    return `{ ${parts.join(' ')} }`;
  }

  const root = mutation ? schema.getMutationType()! : schema.getQueryType()!;
  const body = selection(root, 1 + pick(4));
  const op = `${mutation ? 'mutation' : 'query'}${defs.length ? ` (${defs.join(', ')})` : ''} ${body}`;
  return { query: [op, ...fragments].join('\n'), variables };
}

// Queries only: random mutations would log the administrator out or delete what later cases read (the
// creating documents below cover mutations, and test/foundation/hostile-input.test.ts calls every one).
const schemaDocument = fc.array(fc.nat(), { minLength: 1, maxLength: 60 }).map((choices) => buildDocument(schema, choices, false));
const TOKENS = ['{', '}', '(', ')', '[', ']', '...', 'query', 'mutation', 'fragment', 'on', '$v', ':', '!', '=', '@include(if: true)', 'tenants', 'id', '__typename',
  '"s"', '"""b"""', '123', '1.5e9', '#c\n', ',', 'F0', 'Int', 'ID!', '__schema', 'subscription', '&', '|', '\u0000', '"\\u00'];
const tokenDocument = fc.array(fc.constantFrom(...TOKENS), { maxLength: 200 }).map((ts) => ({ query: ts.join(' '), variables: {} }));
/** Fragment i spreads fragment i-1 twice (under two aliases): expanded naively, 2^n selections from n fragments. */
const chainDocument = fc.tuple(fc.integer({ min: 1, max: 120 }), fc.boolean()).map(([n, nested]) => {
  const frags = [`fragment C0 on Query { __typename }`];
  for (let i = 1; i < n; i++) frags.push(nested ? `fragment C${i} on Query { a: __typename ...C${i - 1} ... on Query { ...C${i - 1} } }` : `fragment C${i} on Query { ...C${i - 1} ...C${i - 1} }`);
  return { query: [`query { ...C${n - 1} }`, ...frags].join('\n'), variables: {} };
});

const limits = ts.service.config.graphql;
const typing = { schema, maxPageSize: ts.service.config.lists.maxLimit, jsonFieldCost: limits.jsonFieldCost };

t.test(`GraphQL documents, checked directly: never a throw, each fragment measured once, each check quick (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let slowest = 0;
  let checked = 0;
  fc.assert(fc.property(fc.oneof(schemaDocument, tokenDocument, chainDocument), ({ query }) => {
    // CPU time, not wall time: the runner is shared, and a descheduled check is not a slow one.
    const start = process.cpuUsage();
    ts.service.graphql.check(query);
    // The same passes by hand, to read how many fragment bodies the cost walk measured.
    if (!scanQueryText(query, limits)) {
      let document;
      try {
        document = parse(query, { maxTokens: limits.maxTokens });
      } catch {
        document = null;
      }
      if (document) {
        checked++;
        const result = checkDocument(document, limits, typing);
        const fragments = document.definitions.filter((d) => d.kind === 'FragmentDefinition').length;
        if (result.fragmentVisits > fragments) return false;
      }
    }
    const used = process.cpuUsage(start);
    const elapsed = (used.user + used.system) / 1000;
    slowest = Math.max(slowest, elapsed);
    // Generous for a loaded 2-core runner; a walk that expanded fragments would take seconds to years here.
    return elapsed < 500;
  }), params(2000));
  t.ok(checked > 700, `${checked} documents parsed and measured; slowest check ${slowest.toFixed(1)} ms`);
});

t.test(`GraphQL documents over HTTP: never a 5xx or INTERNAL, answers bounded, refused mutations store nothing (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const tenantsBefore = (await ts.service.sql<{ n: number }[]>`select count(*)::int as n from tenants`)[0]!.n;
  let biggest = 0;
  let created = 0;
  const codes: Record<string, number> = {};
  // Documents that create a tenant, made invalid (unknown field, too many aliases, too deep) or not.
  const creating = fc.tuple(fc.nat(), fc.constantFrom('ok', 'unknown-field', 'aliases', 'two-operations', 'bad-variable')).map(([n, how]) => {
    const input = how === 'bad-variable' ? { name: `fz-${n}`, alias: 'UPPER CASE!' } : { name: `fz-${n}` };
    const extra = how === 'unknown-field' ? ' nope' : how === 'aliases' ? Array.from({ length: limits.maxAliases + 1 }, (_, i) => ` x${i}: __typename`).join('') : '';
    const other = how === 'two-operations' ? ' query { __typename }' : '';
    return { query: `mutation ($i: CreateTenantInput!) { createTenant(input: $i) { id${extra} } }${other}`, variables: { i: input } };
  });
  // Small documents asking for large answers: aliases of a page of 8 KB attribute documents.
  const amplifying = fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 100 })).map(([aliases, limit]) => ({
    query: `query { ${Array.from({ length: aliases }, (_, i) => `a${i}: entities(tenantId: "${tenant}", limit: ${limit}) { items { id attributes } }`).join(' ')} }`, variables: {},
  }));
  await fc.assert(fc.asyncProperty(fc.oneof({ arbitrary: schemaDocument, weight: 6 }, tokenDocument, chainDocument, creating, amplifying), async ({ query, variables }) => {
    const res = await fetch(`${ts.url()}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` }, body: JSON.stringify({ query, variables }) });
    const text = await res.text();
    biggest = Math.max(biggest, Buffer.byteLength(text));
    if (res.status >= 500 || Buffer.byteLength(text) > ANSWER_MAX) return false;
    const body = JSON.parse(text) as { data?: Record<string, any>; errors?: { extensions?: { code?: string } }[] };
    for (const e of body.errors ?? []) codes[String(e.extensions?.code)] = (codes[String(e.extensions?.code)] ?? 0) + 1;
    if (!body.errors) codes.OK = (codes.OK ?? 0) + 1;
    if ((body.errors ?? []).some((e) => /answer exceeds the limit/.test(String((e as { message?: string }).message)))) codes.TOO_LARGE = (codes.TOO_LARGE ?? 0) + 1;
    if (body.data?.createTenant?.id) created++;
    return !(body.errors ?? []).some((e) => e.extensions?.code === 'INTERNAL');
  }), params(300));
  const tenantsAfter = (await ts.service.sql<{ n: number }[]>`select count(*)::int as n from tenants`)[0]!.n;
  t.equal(tenantsAfter - tenantsBefore, created, `exactly the ${created} tenants answered as created were stored`);
  t.ok((codes.TOO_LARGE ?? 0) > 0, `answers refused for their size: ${codes.TOO_LARGE ?? 0}`);
  t.ok((codes.OK ?? 0) > 30 && (codes.BAD_REQUEST ?? 0) > 50, `answers: ${JSON.stringify(codes)}; largest ${biggest} bytes`);
  t.equal((await fetch(`${ts.url()}/health/live`)).status, 200, 'still serving');
});

t.test(`gRPC: every method with random and mutated message bytes: never INTERNAL or UNKNOWN (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const services = loadServices();
  const methods: { path: string; serialize: (v: unknown) => Buffer; name: string }[] = [];
  for (const name of ['AuthzService', 'AuthService', 'CertificateService', 'AliasService'] as const) {
    const ctor = serviceOf(services, name as never);
    if (!ctor) continue;
    for (const def of Object.values(ctor.service)) methods.push({ path: def.path, serialize: def.requestSerialize as (v: unknown) => Buffer, name: def.originalName ?? def.path });
  }
  t.ok(methods.length >= 6, `${methods.length} methods: ${methods.map((m) => m.path).join(' ')}`);
  const client = new grpc.Client(`127.0.0.1:${ts.service.ports.grpc}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const call = (path: string, bytes: Buffer, md: grpc.Metadata) => new Promise<grpc.ServiceError | null>((resolve) => {
    client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, bytes, md, { deadline: Date.now() + 10_000 }, (err) => resolve(err));
  });
  // Well-formed messages of each method (strings, ids, nested context), then the same bytes mutated.
  const valid = fc.tuple(fc.nat(), nastyString(), fc.constantFrom(...IDS), nastyJson()).map(([i, s, id, j]) => {
    const m = methods[i % methods.length]!;
    const message = { subject_id: id, action: s, resource_id: id, object_kind: s, object_id: id, token: s, credential_id: id, entity_id: id, fingerprint_sha256: s,
      serial_number: s, alias: s, kind: s, secret: s, identifier: s, context: { [s]: s }, tenant_id: id, reason: s, value: JSON.stringify(j) ?? '' };
    let bytes: Buffer;
    try {
      bytes = m.serialize(message);
    } catch {
      bytes = Buffer.alloc(0);
    }
    return { i, bytes };
  });
  const cases = fc.oneof(valid, fc.tuple(fc.nat(), mutated(valid.map((v) => v.bytes))).map(([i, bytes]) => ({ i, bytes })),
    fc.tuple(fc.nat(), fc.uint8Array({ maxLength: 64 })).map(([i, b]) => ({ i, bytes: Buffer.from(b) })));
  const outcomes: Record<string, number> = {};
  await fc.assert(fc.asyncProperty(cases, fc.constantFrom('none', 'admin', 'junk'), async ({ i, bytes }, auth) => {
    const m = methods[i % methods.length]!;
    const md = new grpc.Metadata();
    if (auth === 'admin') md.set('authorization', `Bearer ${admin}`);
    if (auth === 'junk') md.set('authorization', `Bearer ${'%'.repeat(i % 50)}`);
    const err = await call(m.path, bytes, md);
    const code = err ? grpc.status[err.code] ?? String(err.code) : 'OK';
    outcomes[code] = (outcomes[code] ?? 0) + 1;
    if (err && (err.code === grpc.status.INTERNAL || err.code === grpc.status.UNKNOWN)) {
      t.comment(`${m.path} ${auth} ${bytes.toString('hex').slice(0, 80)}: ${code} ${err.details}`);
      return false;
    }
    return true;
  }), params(400));
  t.ok((outcomes.INVALID_ARGUMENT ?? 0) > 50 && (outcomes.UNAUTHENTICATED ?? 0) > 50, `outcomes: ${JSON.stringify(outcomes)}`);
  t.equal((await call(methods.find((m) => m.path.endsWith('/Check'))!.path, Buffer.alloc(0), new grpc.Metadata()))?.code !== grpc.status.UNAVAILABLE, true, 'still serving');
});
