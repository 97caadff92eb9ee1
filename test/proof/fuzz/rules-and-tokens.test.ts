// Generated hostile input (fast-check, FUZZ_SEED replays) for the parsers that decide who may do what,
// called directly for volume: ABAC conditions (stored and evaluated), custom-endpoint variable and response
// mappings with the bodies, queries and headers of a call, session JWTs and bearer headers, MQTT topics and
// subscription filters, and the EST and native enrollment bodies. Each either answers or refuses with
// INVALID_INPUT; nothing throws anything else, nothing widens access, nothing reaches a prototype.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { bearerToken } from '../../../src/auth/bearer.js';
import { peekKid, signJwt, verifyJwt, type SessionClaims } from '../../../src/auth/jwt.js';
import { compileConditions, conditionsHold, firstFailure, OPERATORS, validateConditions, type ConditionInput } from '../../../src/authz/conditions.js';
import { buildVariables, compileResponse, compileVariables, shapeResponse } from '../../../src/custom-endpoints/mapping.js';
import { channelTopic, filterMatches, parsePublishTopic, parseSubscribeFilter } from '../../../src/mqtt/topics.js';
import { decodeEstBody } from '../../../src/pki/enrollment/encodings.js';
import { nativeBody } from '../../../src/pki/enrollment/subjects.js';
import { FUZZ_SEED, mutated, nastyJson, nastyString, outcome, params } from './fuzz.js';

const PROTOTYPE_KEYS = Object.getOwnPropertyNames(Object.prototype).sort();
const prototypeUntouched = () => JSON.stringify(Object.getOwnPropertyNames(Object.prototype).sort()) === JSON.stringify(PROTOTYPE_KEYS)
  && (({}) as Record<string, unknown>).polluted === undefined;

// A small pool of values shared by operands and attributes, so generated conditions sometimes hold.
const POOL = fc.constantFrom<unknown>('a', 'b', '', 1, 2, 0, -1, true, null, ['a'], { x: 1 }, '10.0.0.1', 'GET');
const EXACT = ['entity.id', 'entity.kind', 'entity.tenant_id', 'entity.status', 'resource.id', 'resource.kind', 'tenant.id', 'tenant.status',
  'object.kind', 'object.id', 'context.ip', 'context.method', 'context.mfa_verified', 'context.time'];
const conditionKey = fc.oneof(
  { arbitrary: fc.constantFrom(...EXACT), weight: 4 },
  fc.tuple(fc.constantFrom('entity.attributes.', 'resource.attributes.', 'tenant.attributes.', 'object.attributes.'),
    fc.constantFrom('site', 'a', 'constructor', '__proto__', 'toString', 'a.b', '', '.', 'x.', 'hasOwnProperty')).map(([p, s]) => p + s),
  fc.constantFrom('entity', 'entity.', 'context.other', 'platform.id', '__proto__.x', 'constructor.name', 'entity.attributes'),
  nastyString(),
);
const operand = fc.oneof({ arbitrary: POOL, weight: 4 }, { arbitrary: fc.array(POOL, { maxLength: 3 }), weight: 2 }, { arbitrary: nastyJson(), weight: 1 });
const conditionValue = fc.oneof(
  operand,
  fc.dictionary(fc.constantFrom(...OPERATORS), operand, { minKeys: 1, maxKeys: 2 }),
  fc.dictionary(fc.oneof(fc.constantFrom(...OPERATORS), nastyString()), operand, { maxKeys: 3 }),
);
const conditions = fc.oneof({ arbitrary: fc.dictionary(conditionKey, conditionValue, { maxKeys: 2 }), weight: 5 }, { arbitrary: nastyJson(), weight: 1 });
const record = fc.option(fc.record({
  id: POOL, kind: POOL, status: POOL, tenant_id: POOL, ip: POOL, method: POOL, mfa_verified: POOL,
  attributes: fc.option(fc.dictionary(fc.constantFrom('site', 'a', 'b', 'constructor'), POOL, { maxKeys: 3 }), { nil: undefined }),
}, { requiredKeys: ['attributes'] }), { nil: undefined, freq: 8 });
const conditionInput: fc.Arbitrary<ConditionInput> = fc.record({ entity: record, object: record, resource: record, tenant: record, context: record });
const NOTHING: ConditionInput = { entity: undefined, object: undefined, resource: undefined, tenant: undefined, context: undefined };

t.test(`ABAC conditions: stored or refused cleanly, evaluated without throwing, a missing field never matches (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let accepted = 0;
  let held = 0;
  fc.assert(fc.property(conditions, fc.array(conditionInput, { minLength: 1, maxLength: 4 }), (stored, inputs) => {
    const checked = outcome(() => validateConditions(stored));
    if (checked.ok) accepted++;
    // Evaluation runs on whatever is stored (older rows, hand-written SQL), validated or not.
    const compiled = compileConditions(stored);
    if (!compiled) return true;
    if (conditionsHold(compiled, NOTHING)) return false;
    for (const input of inputs) {
      const holds = conditionsHold(compiled, input);
      if (holds) held++;
      if (holds !== (firstFailure(compiled, input) === null)) return false;
      // A key nobody may reference never holds, whatever the input carries.
      const unreferencable = compiled.list.some((c) => c.path[0] === '\u0000unreferencable');
      if (holds && unreferencable) return false;
    }
    return prototypeUntouched();
  }), params(4000));
  t.ok(accepted > 400 && held > 50, `both sides reached: ${accepted} condition sets accepted, ${held} evaluations held`);
});

const mappingKey = fc.oneof(fc.constantFrom('input', 'input.name', 'id', 'a.b.c', '__proto__', 'constructor.prototype', 'a..b', '.a', 'x.__proto__'), nastyString());
const mappingValue = fc.oneof(
  fc.constantFrom('$body', '$body.a', '$body.a.0', '$body.__proto__', '$body.constructor.prototype', '$query.q', '$query.__proto__', '$headers.X-A',
    '$headers.__proto__', '$auth.entityId', '$auth.tenantId', '$auth.sessionId', '$auth.constructor', '$path', '$other', '$body..a', '$5', 'plain'),
  nastyJson(),
);
const callInput = fc.record({
  body: nastyJson(),
  query: fc.oneof(fc.constantFrom('', 'q=1', 'q=%zz', '__proto__=x', 'q=a&q=b', 'constructor=1'), nastyString()),
  headers: fc.dictionary(fc.constantFrom('x-a', '__proto__', 'constructor', 'authorization'), nastyString(), { maxKeys: 3 }),
  auth: fc.record({ entityId: fc.uuid(), tenantId: fc.option(fc.uuid()), sessionId: fc.option(fc.uuid()) }),
  path: nastyString(),
});

t.test(`custom-endpoint mappings and call inputs: compiled or refused, applied without throwing or polluting (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let compiled = 0;
  fc.assert(fc.property(fc.dictionary(mappingKey, mappingValue, { maxKeys: 5 }), fc.dictionary(nastyString(), fc.oneof(nastyJson(), fc.constantFrom('$.a', '$.a.b', '$.', '$..a', '$.__proto__')), { maxKeys: 4 }),
    callInput, nastyJson(), (variablesMapping, responseMapping, input, data) => {
      const plan = outcome(() => compileVariables(variablesMapping));
      if (plan.ok) {
        compiled++;
        const built = outcome(() => buildVariables(plan.value, input));
        if (built.ok) {
          const variables = built.value;
          // Without forwarding (which passes the parsed body through as it is), a plain object holding only the mapping's own first keys.
          if (!plan.value.forwardBody) {
            if (Object.getPrototypeOf(variables) !== Object.prototype) return false;
            const firsts = new Set(Object.keys(variablesMapping).map((k) => k.split('.')[0]));
            if (Object.keys(variables).some((k) => !firsts.has(k))) return false;
          }
          JSON.stringify(variables);
        }
      }
      const response = outcome(() => compileResponse(responseMapping));
      if (response.ok) {
        const shaped = shapeResponse(response.value, data);
        if (!response.value.whole && Object.keys(shaped as object).some((k) => !Object.prototype.hasOwnProperty.call(responseMapping, k))) return false;
      }
      return prototypeUntouched();
    }), params(4000));
  t.ok(compiled > 500, `mappings reached the apply step (${compiled})`);
});

t.test(`session JWTs: random, forged and mutated tokens never verify and never throw (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const now = 1_900_000_000;
  const claims: SessionClaims = { iss: 'svc', aud: 'svc', sub: randomUUID(), sid: randomUUID(), tid: null, iat: now - 10, exp: now + 3600 };
  const keyFor = (kid: string) => (kid === 'k1' ? publicKey : undefined);
  const expect = { iss: 'svc', aud: 'svc', now };
  const valid = signJwt(claims, 'k1', privateKey);
  t.ok(verifyJwt(valid, keyFor, expect).ok, 'the unmutated token verifies');
  const seg = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
  const [, validClaims, validSig] = valid.split('.') as [string, string, string];
  // Each case says whether it may verify: only the untouched token, or claims the right key really signed.
  const tokens: fc.Arbitrary<{ token: string; signedByKey: boolean }> = fc.oneof(
    nastyString(),
    fc.string({ unit: fc.constantFrom(...'ABCabc019-_.=+/ '), maxLength: 300 }),
    // Forged headers over the real claims and signature: other algorithms, kids, types, shapes.
    fc.record({ alg: fc.constantFrom('none', 'HS256', 'ES256', 'es256', 'RS256', 'ES384', ''), kid: fc.oneof(fc.constantFrom('k1', 'k2', ''), nastyJson()),
      typ: fc.option(fc.constantFrom('JWT', 'jwt', 'JWS')) }, { requiredKeys: ['alg'] })
      .chain((header) => fc.constantFrom(`${seg(header)}.${validClaims}.${validSig}`, `${seg(header)}.${validClaims}.`, `${seg(header)}.${validClaims}`)),
    // Re-signed with the right key but other claims (wrong audience, bad ids, expired, odd types), and signed by another key.
    fc.record({ iss: fc.constantFrom('svc', 'other'), aud: fc.constantFrom('svc', 'x'), sub: fc.oneof(fc.uuid(), fc.constant(claims.sub), nastyJson()),
      sid: fc.oneof(fc.uuid(), fc.constant(claims.sid), nastyJson()), tid: fc.oneof(fc.constant(null), fc.uuid(), nastyJson()), iat: fc.oneof(fc.integer(), nastyJson()),
      exp: fc.oneof(fc.integer({ min: now - 5, max: now + 5 }), fc.double({ min: now - 1, max: now + 1 }), nastyJson()) })
      .chain((c) => fc.constantFrom({ token: signJwt(c as SessionClaims, 'k1', privateKey), signedByKey: true }, signJwt(claims, 'k1', other.privateKey))),
    // The valid token with characters replaced, inserted, removed.
    fc.array(fc.tuple(fc.nat(valid.length - 1), fc.constantFrom(...'AaZz09-_.=+/'), fc.nat(2)), { minLength: 1, maxLength: 3 }).map((edits) => {
      let s = valid;
      for (const [at, ch, kind] of edits) s = kind === 0 ? s.slice(0, at) + ch + s.slice(at + 1) : kind === 1 ? s.slice(0, at) + ch + s.slice(at) : s.slice(0, at) + s.slice(at + 1);
      return s;
    }),
  ).map((v) => (typeof v === 'string' ? { token: v, signedByKey: false } : v));
  let verified = 0;
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  let resigned = 0;
  fc.assert(fc.property(tokens, ({ token, signedByKey }) => {
    peekKid(token);
    bearerToken(`Bearer ${token}`);
    const result = verifyJwt(token, keyFor, expect);
    if (!result.ok) return true;
    if (signedByKey) {
      // Claims the key really signed pass only in the strict shape: ids, tenant, times, issuer and audience.
      resigned++;
      const c = result.claims;
      return UUID.test(c.sub) && UUID.test(c.sid) && (c.tid === null || UUID.test(c.tid)) && c.exp > now && typeof c.iat === 'number' && c.iss === 'svc' && c.aud === 'svc';
    }
    verified++;
    // One session has exactly one valid token string: anything else that verifies is the token itself.
    return token === valid;
  }), params(5000));
  t.ok(verified < 50 && resigned > 5, `only the untouched token verified (${verified} times, when a mutation undid itself); ${resigned} well-formed re-signed claims passed`);
});

const UUIDS = [randomUUID(), randomUUID(), randomUUID().toUpperCase()];
const level = fc.oneof(fc.constantFrom('m', 'c', '+', '#', '', '.', '..', 'a', 'a+', '#b', 'x y', '\u0000', 'é', '$SYS'), fc.constantFrom(...UUIDS), nastyString());
const idOrWildcard = fc.oneof({ arbitrary: fc.constantFrom(...UUIDS), weight: 4 }, fc.constantFrom('+', '#', '', 'x'));
const topicLike = fc.oneof(
  fc.tuple(idOrWildcard, idOrWildcard, fc.array(level, { maxLength: 3 })).map(([w, c, rest]) => ['m', w, 'c', c, ...rest].join('/')),
  fc.array(level, { maxLength: 7 }).map((l) => l.join('/')),
);

t.test(`MQTT topics and filters: a filter never reaches past its channel, parsing never throws (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let matched = 0;
  fc.assert(fc.property(topicLike, fc.array(topicLike, { minLength: 1, maxLength: 5 }), (filter, others) => {
    const scope = parseSubscribeFilter(filter);
    // The topics the filter's own wildcards stand for, besides unrelated ones.
    const topics = [...others, filter.replace(/\+/g, UUIDS[0]!), filter.replace(/#/g, `${UUIDS[1]}/b`), filter.replace(/\/?#/, ''), filter.replace(/\+/g, 'a')];
    for (const topic of topics) {
      const parsed = parsePublishTopic(topic);
      if (parsed && channelTopic(parsed.workspaceId, parsed.channelId, parsed.subtopic) !== topic) return false;
      if (scope && parsed && filterMatches(filter, topic)) {
        matched++;
        if (parsed.workspaceId !== scope.workspaceId || parsed.channelId !== scope.channelId) return false;
      }
    }
    return true;
  }), params(5000));
  t.ok(matched > 100, `filters matched topics (${matched})`);
});

t.test(`EST and native enrollment bodies: DER or a clean refusal (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const der = fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.concat([Buffer.from([0x30, b.length]), b]));
  const body = fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    der.map((d) => Buffer.from(d.toString('base64'))),
    mutated(der.map((d) => Buffer.from(d.toString('base64').replace(/(.{8})/g, '$1\r\n')))),
    nastyString().map((s) => Buffer.from(s)),
  );
  let decoded = 0;
  fc.assert(fc.property(body, (b) => {
    const r = outcome(() => decodeEstBody(b, 'certificate request'));
    if (r.ok) decoded++;
    return !r.ok || (r.value.length > 0 && r.value[0] === 0x30);
  }), params(3000));
  const native = fc.oneof(
    fc.record({ csr_pem: fc.oneof(fc.constant('-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----'), nastyJson()),
      idempotency_key: fc.oneof(fc.string({ minLength: 1 }), nastyJson()), ttl_secs: fc.option(fc.oneof(fc.integer(), nastyJson()), { nil: undefined }),
      entity_id: fc.option(nastyJson(), { nil: undefined, freq: 3 }), tenantId: fc.option(nastyJson(), { nil: undefined, freq: 3 }) }),
    nastyJson(),
  ).map((v) => Buffer.from(JSON.stringify(v) ?? ''));
  let accepted = 0;
  fc.assert(fc.property(fc.oneof(native, mutated(native)), (b) => {
    const r = outcome(() => nativeBody(b));
    if (!r.ok) return true;
    accepted++;
    // What the subject chooses never passes: ids come from authentication.
    const parsed = JSON.parse(b.toString('utf8')) as Record<string, unknown>;
    return parsed.entity_id === undefined && parsed.tenantId === undefined && typeof r.value.csrPem === 'string' && r.value.idempotencyKey !== '';
  }), params(3000));
  t.ok(decoded > 300 && accepted > 10, `both sides reached: ${decoded} EST bodies decoded, ${accepted} native bodies accepted`);
});
