// SenML resolution (RFC 8428 section 4.6) over the RFC's own examples, and validation messages.
import t, { type Test } from 'tap';
import { parseSenml } from '../../src/messaging/senml.js';

const ctx = { channel: 'c', publisher: 'p', protocol: 'http' as const, subtopic: null };
const limits = { maxRecords: 100 };
const NOW = 1_800_000_000;
const parse = (pack: unknown) => parseSenml(JSON.stringify(pack), ctx, limits, NOW);
const brief = (pack: unknown) => parse(pack).map((m) => ({ name: m.name, unit: m.unit, time: m.time, value: m.value }));

function fails(t: Test, pack: unknown, message: string | RegExp, details?: Record<string, unknown>) {
  try {
    parseSenml(typeof pack === 'string' ? pack : JSON.stringify(pack), ctx, limits, NOW);
    t.fail(`expected a refusal: ${message}`);
  } catch (err) {
    const e = err as { kind: string; message: string; details?: Record<string, unknown> };
    t.equal(e.kind, 'INVALID_INPUT');
    if (typeof message === 'string') t.equal(e.message, message);
    else t.match(e.message, message);
    if (details) t.same(e.details, details);
  }
}

t.test('RFC 8428 5.1.2: multiple data points, base name and base time carried forward', async (t) => {
  const pack = [
    { bn: 'urn:dev:ow:10e2073a01080063:', bt: 1.320067464e+09, bu: '%RH', v: 20 },
    { u: 'lon', v: 24.30621 },
    { u: 'lat', v: 60.07965 },
    { t: 60, v: 20.3 },
    { u: 'lon', t: 60, v: 24.30622 },
    { u: 'lat', t: 60, v: 60.07965 },
    { t: 120, v: 20.7 },
  ];
  const bn = 'urn:dev:ow:10e2073a01080063:';
  t.same(brief(pack), [
    { name: bn, unit: '%RH', time: 1320067464, value: 20 },
    { name: bn, unit: 'lon', time: 1320067464, value: 24.30621 },
    { name: bn, unit: 'lat', time: 1320067464, value: 60.07965 },
    { name: bn, unit: '%RH', time: 1320067524, value: 20.3 },
    { name: bn, unit: 'lon', time: 1320067524, value: 24.30622 },
    { name: bn, unit: 'lat', time: 1320067524, value: 60.07965 },
    { name: bn, unit: '%RH', time: 1320067584, value: 20.7 },
  ]);
});

t.test('RFC 8428 5.1.4: resolved form of a pack with relative times', async (t) => {
  // The RFC's example: bt with t offsets and a later bt replacing the first.
  const pack = [
    { bn: 'urn:dev:ow:10e2073a0108006:', bt: 1.276020076001e+09, bu: 'A', bver: 5, n: 'voltage', u: 'V', v: 120.1 },
    { n: 'current', t: -5, v: 1.2 },
    { n: 'current', t: -4, v: 1.3 },
    { n: 'current', t: -3, v: 1.4 },
  ];
  const bn = 'urn:dev:ow:10e2073a0108006:';
  const bt = 1.276020076001e+09;
  t.same(brief(pack), [
    { name: `${bn}voltage`, unit: 'V', time: bt, value: 120.1 },
    { name: `${bn}current`, unit: 'A', time: bt - 5, value: 1.2 },
    { name: `${bn}current`, unit: 'A', time: bt - 4, value: 1.3 },
    { name: `${bn}current`, unit: 'A', time: bt - 3, value: 1.4 },
  ]);
});

t.test('base value and base sum are added and carried forward; a new base replaces the old', async (t) => {
  const out = parse([
    { bn: 'm:', bt: 1_700_000_000, bv: 10, bs: 100, n: 'a', v: 1, s: 1 },
    { n: 'b', v: 2 },
    { bv: 0, n: 'c', v: 3, s: 5 },
    { bu: '', n: 'd', vs: 'x' },
  ]);
  t.same(out.map((m) => [m.name, m.value, m.sum]), [['m:a', 11, 101], ['m:b', 12, null], ['m:c', 3, 105], ['m:d', null, null]]);
});

t.test('times: missing or small resolved times are relative to now; 2^28 and above are absolute', async (t) => {
  t.same(parse([{ n: 'a', v: 1 }, { n: 'b', v: 1, t: -10 }, { n: 'c', v: 1, t: 268_435_456 }]).map((m) => m.time), [NOW, NOW - 10, 268_435_456]);
  t.same(parse([{ bt: -30, n: 'a', v: 1 }, { n: 'b', v: 1, t: 5 }]).map((m) => m.time), [NOW - 30, NOW - 25]);
  t.same(parse([{ n: 'a', v: 1, ut: 60 }]).map((m) => m.updateTime), [60]);
});

t.test('value kinds and the context fields', async (t) => {
  const [m] = parseSenml('[{"n":"x","vb":false}]', { ...ctx, subtopic: 'a/b', protocol: 'mqtt' }, limits, NOW);
  t.same(m, {
    channel: 'c', publisher: 'p', protocol: 'mqtt', subtopic: 'a/b', name: 'x', unit: null, time: NOW, value: null,
    stringValue: null, boolValue: false, dataValue: null, sum: null, updateTime: null,
  });
  t.equal(parse([{ n: 'x', vs: '' }])[0]!.stringValue, '', 'an empty string value is a value');
  t.equal(parse([{ n: 'x', s: 0 }])[0]!.sum, 0, 'a sum alone is enough');
  t.equal(parseSenml(Buffer.from('[{"n":"x","v":-0.5}]'), ctx, limits, NOW)[0]!.value, -0.5, 'Buffer payloads');
  t.equal(parse([{ n: 'x', v: 1, l: '[]', ext: 1 }]).length, 1, 'unknown fields without a trailing underscore are ignored');
});

t.test('validation names the record and the field', async (t) => {
  fails(t, '[', 'payload is not valid JSON');
  fails(t, { n: 'a' }, 'payload must be a JSON array of SenML records');
  fails(t, [], 'payload must contain at least one SenML record');
  fails(t, [1], 'record 0: must be a JSON object');
  fails(t, [{ n: 'a', v: 1 }, { n: 'b', v: '1' }], "record 1: field 'v' must be a number", { record: 1, field: 'v' });
  fails(t, [{ n: 'a', v: 1e400 }], /record 0: field 'v' must be a number|not valid JSON/);
  fails(t, [{ n: 'a', vb: 'true' }], "record 0: field 'vb' must be a boolean");
  fails(t, [{ n: 1, v: 1 }], "record 0: field 'n' must be a string");
  fails(t, [{ bn: 'a', v: 1 }, { bn: 'b', n: 'x y', v: 1 }], /record 1: field 'n' resolves to 'bx y'/);
  fails(t, [{ bn: '_a', v: 1 }], /record 0: field 'bn' resolves to '_a'/);
  fails(t, [{ v: 1 }], "record 0: field 'n' is required when there is no base name (bn)");
  fails(t, [{ n: 'a' }], 'record 0: needs a value (v, vs, vb or vd) or a sum (s)');
  fails(t, [{ n: 'a', v: 1, vb: true }], 'record 0: has 2 value fields; at most one of v, vs, vb, vd is allowed');
  fails(t, [{ bver: 0, n: 'a', v: 1 }], "record 0: field 'bver' must be a positive integer");
  fails(t, [{ bver: 10.5, n: 'a', v: 1 }], "record 0: field 'bver' must be a positive integer");
  fails(t, [{ bver: 12, n: 'a', v: 1 }], "record 0: field 'bver' is 12; this service supports SenML versions up to 10");
  fails(t, [{ n: 'a', v: 1, bver: 10 }, { n: 'b', v: 1, bver: 9 }], "record 1: field 'bver' must be the same in every record of a pack");
  fails(t, [{ n: 'a', v: 1, x_: 1 }], "record 0: field 'x_' is a must-understand field this service does not support");
  // The same label spelled with JSON escapes, and after records that hold none: still found.
  fails(t, '[{"n":"a","v":1},{"n":"b","v":1,"x\\u005f":1}]', "record 1: field 'x_' is a must-understand field this service does not support");
  fails(t, '[{"n":"a","v":1,"x_\\u0022":1,"y\\u005f":2}]', "record 0: field 'y_' is a must-understand field this service does not support");
  // Labels that only look close ('_' inside, an escaped quote after '_' in a value) are ignored.
  t.equal(parseSenml('[{"n":"a","v":1,"x_y":1,"l":"a_\\"b"}]', ctx, limits, NOW).length, 1);
  // Non-ASCII printable units take the long check; a unit with a control character does not pass it.
  t.equal(parse([{ n: 'a', u: '°C', v: 1 }])[0]?.unit, '°C');
  fails(t, [{ n: 'a', u: 'a\u0007', v: 1 }], "record 0: field 'u' must be printable text");
  fails(t, [{ n: 'é', v: 1 }], /record 0: field 'n' resolves to 'é'/);
  fails(t, [{ n: 'a', vs: 'a\u0000b' }], "record 0: field 'vs' must not contain NUL characters");
  fails(t, [{ n: 'a', u: 'a\nb', v: 1 }], "record 0: field 'u' must be printable text");
  fails(t, [{ n: 'a', vd: 'aGk=' }], "record 0: field 'vd' must be base64url data without padding");
  fails(t, [{ n: 'a', v: 1, ut: -1 }], "record 0: field 'ut' must not be negative");
  // Two finite numbers whose sum is not: stored as Infinity, the reader would answer null.
  fails(t, [{ bt: 1.7e308, n: 'a', v: 1 }, { n: 'b', t: 1.7e308, v: 1 }], "record 1: field 't' resolves to a time (bt + t) beyond the range of a number");
  fails(t, [{ bv: -1.7e308, n: 'a', v: -1.7e308 }], "record 0: field 'v' resolves to a value (bv + v) beyond the range of a number");
  fails(t, [{ bs: 1.7e308, n: 'a', s: 1.7e308 }], "record 0: field 's' resolves to a sum (bs + s) beyond the range of a number");
  t.equal(parse([{ bt: 1.7e308, n: 'a', t: -1.7e308, v: 1.7e308 }])[0]?.value, 1.7e308, 'large numbers that stay in range are kept');
  fails(t, [{ n: 'a'.repeat(513), v: 1 }], /record 0: field 'n' must be at most 512 characters/);
  fails(t, Array.from({ length: 101 }, () => ({ n: 'a', v: 1 })), 'payload has 101 records; at most 100 are accepted per message');
});

t.test('a payload of bytes must be UTF-8 (MQTT and CoAP hand bytes over as they came)', async (t) => {
  const good = parseSenml(Buffer.from('[{"n":"place","vs":"café"}]'), ctx, limits, NOW);
  t.equal(good[0]!.stringValue, 'café');
  t.throws(() => parseSenml(Buffer.from('[{"n":"place","vs":"caf\xe9"}]', 'latin1'), ctx, limits, NOW),
    { kind: 'INVALID_INPUT', message: 'payload is not valid UTF-8' }, 'a Latin-1 byte is refused, not turned into U+FFFD');
});
