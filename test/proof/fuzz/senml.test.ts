// SenML packs from fast-check (FUZZ_SEED replays), called directly for volume. This extends, and does not
// repeat, test/messaging/senml-fuzz.test.ts (its own seeded generator: field edges, the trip through
// resolved SenML, and the same inputs over HTTP with exactly the accepted ones stored) and
// test/mqtt/hostile-input.test.ts (MQTT and CoAP listeners under random and mutated packets, nothing
// reaching a channel the device may not publish to). Here: packs whose records mix every RFC 8428 field
// with values of every JSON type, as JSON text and as that text mutated. Each is resolved into messages
// that keep the parser's promises (finite numbers, one value each, a name, at most the record limit) or
// refused with INVALID_INPUT; nothing else.
import fc from 'fast-check';
import t from 'tap';
import { parseSenml } from '../../../src/messaging/senml.js';
import { FUZZ_SEED, mutated, nastyJson, outcome, params } from './fuzz.js';

const ctx = { channel: 'c', publisher: 'p', protocol: 'http' as const, subtopic: null };
const MAX_RECORDS = 8;
const FIELDS = ['bn', 'bt', 'bu', 'bv', 'bs', 'bver', 'n', 'u', 'v', 'vs', 'vb', 'vd', 's', 't', 'ut', 'x_', 'bn_', 'foo'];
const typed: Record<string, fc.Arbitrary<unknown>> = {
  bn: fc.constantFrom('urn:dev:x:', 'a', '', 'é'), n: fc.constantFrom('temp', 'a', '', '-x', '/'), bu: fc.constantFrom('Cel', '%RH', ''), u: fc.constantFrom('Cel', 'm', ''),
  v: fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer()), bv: fc.double(), s: fc.double(), bs: fc.double(), t: fc.double(), bt: fc.double(), ut: fc.double(), bver: fc.integer({ min: -1, max: 12 }),
  vs: fc.string(), vb: fc.boolean(), vd: fc.constantFrom('aGVsbG8', 'aGVsbG8=', '-_', '!!'),
};
// A record that would pass (a name and a value), with a few fields added or replaced by anything.
const extra = fc.dictionary(fc.constantFrom(...FIELDS), fc.constant(null), { maxKeys: 3 })
  .chain((shape) => fc.record(Object.fromEntries(Object.keys(shape).map((k) => [k, fc.oneof({ arbitrary: typed[k] ?? nastyJson(), weight: 3 }, nastyJson())]))));
const record = fc.tuple(typed.n!, fc.oneof(typed.v!, typed.vs!, typed.vb!), extra).map(([n, v, more]) => ({ n, [typeof v === 'number' ? 'v' : typeof v === 'string' ? 'vs' : 'vb']: v, ...more }));
const pack = fc.oneof({ arbitrary: fc.array(record, { maxLength: MAX_RECORDS + 2 }), weight: 5 }, nastyJson());
const payload = fc.oneof(pack.map((p) => Buffer.from(JSON.stringify(p) ?? 'null')), mutated(pack.map((p) => Buffer.from(JSON.stringify(p) ?? '[]'))));

t.test(`SenML packs: resolved into sound messages or refused with INVALID_INPUT (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  let accepted = 0;
  fc.assert(fc.property(payload, (bytes) => {
    const r = outcome(() => parseSenml(bytes, ctx, { maxRecords: MAX_RECORDS }, 1_800_000_000));
    if (!r.ok) return true;
    accepted++;
    const messages = r.value;
    if (messages.length === 0 || messages.length > MAX_RECORDS) return false;
    return messages.every((m) => {
      const values = [m.value, m.stringValue, m.boolValue, m.dataValue].filter((v) => v !== null);
      return m.name.length > 0 && Number.isFinite(m.time) && values.length <= 1 && (m.value === null || Number.isFinite(m.value))
        && JSON.stringify(m) !== undefined;
    });
  }), params(3000));
  t.ok(accepted > 20, `packs resolved: ${accepted}`);
});
