// SenML under hostile input, from a seeded generator (the seed is printed; FUZZ_SEED replays a run):
// packs of random records whose fields get values of every JSON type and of the edges of each (huge and
// tiny numbers, names at and past their limits, NUL, lone surrogates, must-understand labels), and
// random byte strings. Every input is either resolved into messages that hold the parser's promises or
// refused with INVALID_INPUT naming the payload or the record; nothing else. What is resolved survives
// the trip through resolved SenML (what MQTT subscribers of another protocol's messages get) unchanged.
// Over HTTP, the same inputs answer 202 or a 4xx with a JSON error, and exactly the accepted ones are stored.
import t from 'tap';
import { isAppError } from '../../src/errors.js';
import { parseSenml, toResolvedSenml } from '../../src/messaging/senml.js';
import type { StoredMessage } from '../../src/messaging/index.js';
import { AUTH_ENV } from '../helpers/auth.js';
import { FUZZ_SEED, generator, type Generator } from '../helpers/fuzz.js';
import { startTestService } from '../helpers/service.js';
import { countRows, publish, world } from './helpers.js';

const NOW = 1_800_000_000;
const RELATIVE_TIME_LIMIT = 2 ** 28;
const ctx = { channel: 'c', publisher: 'p', protocol: 'http' as const, subtopic: null };
const limits = { maxRecords: 8 };

const NAME_PARTS = ['urn:dev:ow:10e2073a01080063:', 'temp', 'a', '9', '-x', '_', '.', '/', ':', 'é', ' ', '', 'Zz'];
const UNITS = ['Cel', '%RH', 'm/s2', 'lon', '', ' ', 'k Pa', 'µs', '\u0007', 'x'.repeat(64), 'x'.repeat(65)];
const NUMBERS = [0, -0, 1, -1, 0.5, 1e-320, 1.7976931348623157e308, -1.7976931348623157e308, 2 ** 53, RELATIVE_TIME_LIMIT,
  RELATIVE_TIME_LIMIT - 1, 1.32e9, -1.32e9, NOW, 3.5, -273.15];

function text(g: Generator): string {
  switch (g.int(8)) {
    case 0: return '';
    case 1: return 'n\u0000ul';
    case 2: return 'lone\ud800';
    case 3: return 'x'.repeat(g.pick([511, 512, 513, 600]));
    case 4: return String.fromCharCode(...Array.from({ length: g.int(6) }, () => g.int(0x3000)));
    default: return Array.from({ length: 1 + g.int(3) }, () => g.pick(NAME_PARTS)).join('');
  }
}

function anyValue(g: Generator, depth = 0): unknown {
  switch (g.int(depth > 1 ? 6 : 8)) {
    case 0: return g.pick(NUMBERS);
    case 1: return (g.next() - 0.5) * 10 ** g.int(12);
    case 2: return text(g);
    case 3: return g.next() < 0.5;
    case 4: return null;
    case 5: return g.int(20);
    case 6: return [anyValue(g, depth + 1)];
    default: return { v: anyValue(g, depth + 1) };
  }
}

/** A field's value: usually of the type the field wants (so packs get past the first check), else anything. */
function fieldValue(g: Generator, field: string): unknown {
  if (g.next() < 0.2) return anyValue(g);
  switch (field) {
    case 'bn': case 'n': return Array.from({ length: 1 + g.int(3) }, () => g.pick(NAME_PARTS)).join('');
    case 'bu': case 'u': return g.pick(UNITS);
    case 'vs': return text(g);
    case 'vb': return g.next() < 0.5;
    case 'vd': return g.pick(['', 'aGVsbG8', 'aGVsbG8=', 'a+b/', '-_']);
    case 'bver': return g.pick([1, 5, 10, 11, 0, 2.5, -1]);
    case 'ut': return g.pick([0, 10, -1, 1e9]);
    default: return g.next() < 0.5 ? g.pick(NUMBERS) : (g.next() - 0.5) * 10 ** g.int(10);
  }
}

const FIELDS = ['bn', 'bt', 'bu', 'bv', 'bs', 'bver', 'n', 'u', 'v', 'vs', 'vb', 'vd', 's', 't', 'ut', 'l', 'x', 'foo_', '__proto__'];
const VALID_NAMES = ['urn:dev:ow:10e2073a01080063:', 'temp', 'a1', 'room/3', 'x.y_z-w'];

function set(record: Record<string, unknown>, field: string, value: unknown): void {
  // defineProperty: '__proto__' becomes a key of its own, as JSON.parse makes it.
  Object.defineProperty(record, field, { value, enumerable: true, writable: true, configurable: true });
}

/** A record RFC 8428 accepts: a name (or a base name before it), one value or a sum, maybe bases and a time. */
function validRecord(g: Generator): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  if (g.next() < 0.3) r.bn = g.pick(VALID_NAMES);
  if (g.next() < 0.2) r.bt = g.pick([1.32e9, NOW, 0, -5, RELATIVE_TIME_LIMIT]);
  if (g.next() < 0.2) r.bu = g.pick(['Cel', '%RH', '']);
  if (g.next() < 0.1) r.bver = 10;
  if (g.next() < 0.1) r.bv = g.pick([0, 100, -0.5]);
  if (r.bn === undefined || g.next() < 0.7) r.n = g.pick(VALID_NAMES);
  const value = g.pick(['v', 'v', 'v', 'vs', 'vb', 'vd', 's']);
  if (value === 'vs') r.vs = g.pick(['on', '', 'ünïcode', 'x'.repeat(1000)]);
  else if (value === 'vd') r.vd = g.pick(['', 'aGVsbG8', '-_']);
  else if (value === 'vb') r.vb = g.next() < 0.5;
  else r[value] = g.pick(NUMBERS);
  if (g.next() < 0.4) r.t = g.pick([0, -10, 60, 1.32e9, 0.001]);
  if (g.next() < 0.3) r.u = g.pick(['Cel', 'lon', '%RH', '']);
  return r;
}

/** Mostly valid packs, then zero to three mutations: a field set to anything, a field removed, a record replaced. */
function randomPack(g: Generator): unknown {
  if (g.next() < 0.02) return anyValue(g);
  const pack: unknown[] = Array.from({ length: g.int(limits.maxRecords + 2) }, () => validRecord(g));
  for (let k = g.next() < 0.4 ? 0 : 1 + g.int(3); k > 0 && pack.length > 0; k--) {
    const i = g.int(pack.length);
    const record = pack[i];
    const roll = g.next();
    if (roll < 0.1 || record === null || typeof record !== 'object') pack[i] = anyValue(g);
    else if (roll < 0.3) delete (record as Record<string, unknown>)[g.pick(Object.keys(record))];
    else {
      const field = g.pick(FIELDS);
      set(record as Record<string, unknown>, field, g.next() < 0.7 ? fieldValue(g, field) : anyValue(g));
    }
  }
  return pack;
}

/** A pack as text: usually its JSON, sometimes cut short or with a byte flipped. */
function payloadOf(g: Generator, pack: unknown): string {
  const json = JSON.stringify(pack) ?? 'undefined';
  const roll = g.next();
  if (roll < 0.05) return json.slice(0, g.int(json.length));
  if (roll < 0.1) {
    const at = g.int(json.length);
    return json.slice(0, at) + String.fromCharCode(g.int(128)) + json.slice(at + 1);
  }
  return json;
}

/** What a resolved message promises, whatever it came from. */
function problemWith(m: StoredMessage): string | null {
  if (!/^[A-Za-z0-9][A-Za-z0-9:./_-]*$/.test(m.name) || m.name.length > 512) return `name ${JSON.stringify(m.name)}`;
  if (!Number.isFinite(m.time)) return `time ${m.time}`;
  for (const x of [m.value, m.sum]) if (x !== null && !Number.isFinite(x)) return `number ${x}`;
  const values = [m.value, m.stringValue, m.boolValue, m.dataValue].filter((x) => x !== null).length;
  if (values > 1 || (values === 0 && m.sum === null)) return `${values} values, sum ${m.sum}`;
  for (const s of [m.name, m.unit, m.stringValue, m.dataValue]) {
    if (s !== null && (s.includes('\u0000') || !s.isWellFormed())) return `text ${JSON.stringify(s)}`;
  }
  return null;
}

/** Records resolved from `payload`, or the refusal; anything but INVALID_INPUT fails the test. */
function attempt(payload: string): { messages: StoredMessage[] } | { refused: string } {
  try {
    return { messages: parseSenml(payload, ctx, limits, NOW) };
  } catch (err) {
    if (isAppError(err) && err.kind === 'INVALID_INPUT') return { refused: err.message };
    throw new Error(`payload ${payload.slice(0, 300)} threw ${String(err)}`);
  }
}

t.test(`random packs: resolved or refused with INVALID_INPUT, never anything else (seed ${FUZZ_SEED})`, async (t) => {
  const g = generator(FUZZ_SEED);
  let resolved = 0;
  let roundTrips = 0;
  const refusals = new Set<string>();
  const broken: string[] = [];
  for (let i = 0; i < 20_000; i++) {
    const payload = payloadOf(g, randomPack(g));
    const outcome = attempt(payload);
    if ('refused' in outcome) {
      if (!/^(record \d+: |payload )/.test(outcome.refused)) t.fail(`refusal names neither the payload nor a record: ${outcome.refused}`);
      refusals.add(outcome.refused.replace(/\d+/g, 'N').slice(0, 60));
      continue;
    }
    resolved++;
    for (const m of outcome.messages) {
      const problem = problemWith(m);
      if (problem) t.fail(`resolved a message with a bad ${problem} from ${payload.slice(0, 300)}`);
    }
    // Resolved SenML carries absolute times; a time before 2^28 s would read back as relative (RFC 8428 4.5.3).
    if (outcome.messages.some((m) => m.time < RELATIVE_TIME_LIMIT)) continue;
    const again = attempt(JSON.stringify(toResolvedSenml(outcome.messages)));
    roundTrips++;
    if ('refused' in again) broken.push(`refused (${again.refused}): ${payload.slice(0, 300)}`);
    else if (JSON.stringify(again.messages) !== JSON.stringify(outcome.messages)) broken.push(`changed: ${payload.slice(0, 300)}`);
  }
  t.same(broken.slice(0, 5), [], `resolved SenML reads back as the same messages (${roundTrips} round trips)`);
  t.ok(resolved > 2000, `${resolved} of 20000 packs resolved`);
  t.ok(refusals.size > 20, `${refusals.size} kinds of refusal seen`);
});

t.test(`random bytes: refused with INVALID_INPUT (seed ${FUZZ_SEED})`, async (t) => {
  const g = generator(FUZZ_SEED + 1);
  for (let i = 0; i < 5_000; i++) {
    const bytes = Buffer.from(Array.from({ length: g.int(40) }, () => (g.next() < 0.6 ? g.pick([...Buffer.from('[{"n":"v":1,}]\\u')]) : g.int(256))));
    try {
      parseSenml(bytes, ctx, limits, NOW);
    } catch (err) {
      if (!(isAppError(err) && err.kind === 'INVALID_INPUT')) t.fail(`bytes ${bytes.toString('hex')} threw ${String(err)}`);
    }
  }
  t.pass('5000 byte strings');
});

t.test(`over HTTP: 202 or a 4xx with a JSON error, and exactly the accepted records stored (seed ${FUZZ_SEED})`, async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_MESSAGING_MAX_RECORDS: String(limits.maxRecords) });
  const w = await world(ts, 'fuzzed');
  const g = generator(FUZZ_SEED + 2);
  let accepted = 0;
  let records = 0;
  for (let i = 0; i < 300; i++) {
    const payload = payloadOf(g, randomPack(g));
    const expected = (() => {
      try {
        return parseSenml(payload, ctx, limits, NOW).length;
      } catch {
        return 0;
      }
    })();
    const res = await publish(ts, w.ws, w.channel, w.publisher.key, payload);
    const body = await res.text();
    if (res.status === 202) {
      accepted++;
      records += expected;
      if (expected === 0 || body !== '') t.fail(`202 for ${payload.slice(0, 200)}, which the parser refuses, or with a body`);
    } else if (res.status !== 400 && res.status !== 413) {
      t.fail(`${res.status} for ${payload.slice(0, 200)}: ${body.slice(0, 200)}`);
    } else {
      if (expected > 0) t.fail(`refused ${payload.slice(0, 200)}, which the parser accepts: ${body}`);
      if (typeof (JSON.parse(body) as { error?: unknown }).error !== 'string') t.fail(`not a JSON error: ${body.slice(0, 200)}`);
    }
  }
  t.ok(accepted > 20, `${accepted} of 300 accepted`);
  t.equal(await countRows(ts, w.channel), records, 'every record of every accepted publish stored, nothing of a refused one');
});
