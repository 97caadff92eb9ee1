// SenML (RFC 8428) JSON packs parsed, validated and resolved into stored messages in one pass.
import { invalidInput, type AppError } from '../errors.js';
import { UNPAIRED_SURROGATE, utf8Text } from '../validate.js';
import type { Protocol, StoredMessage } from './types.js';

/** RFC 8428 is version 10; earlier drafts' packs (lower versions) use a subset of the same fields. */
export const SENML_VERSION = 10;
/** Resolved times below 2^28 are relative to the receive time (RFC 8428 section 4.5.3). */
const RELATIVE_TIME_LIMIT = 268_435_456;
/** Names, units and base names: long enough for any sane sensor path, short enough to bound a row. */
const MAX_NAME_CHARS = 512;
// RFC 8428 section 4.5.1: the resolved name's character set (letters, digits and - : . / _), starting with
// a letter or digit. A table over ASCII: 2 = may start a name, 1 = may follow; every name is checked on
// the publish path, and a loop over it costs a fifth of the equivalent regular expression.
const NAME_CHARS = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[A-Za-z0-9]/.test(ch)) NAME_CHARS[c] = 2;
  else if (':./_-'.includes(ch)) NAME_CHARS[c] = 1;
}

function validName(name: string): boolean {
  const first = name.charCodeAt(0);
  if (first >= 128 || NAME_CHARS[first] !== 2) return false;
  for (let i = 1; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 128 || NAME_CHARS[c] === 0) return false;
  }
  return true;
}
// base64url without padding, the encoding RFC 8428 gives vd in JSON.
const DATA = /^[A-Za-z0-9_-]*$/;
const MAX_UNIT_CHARS = 64;
const UNIT_CHARS = /^[\x21-\x7e\u00a0-\uffff]+(?: [\x21-\x7e\u00a0-\uffff]+)*$/u;

/** What the stored messages carry besides the record itself. */
export interface SenmlContext {
  channel: string;
  publisher: string;
  protocol: Protocol;
  subtopic: string | null;
}

export interface SenmlLimits {
  maxRecords: number;
}

function fieldError(index: number, field: string, rule: string): AppError {
  return invalidInput(`record ${index}: field '${field}' ${rule}`, { record: index, field });
}

/**
 * A base plus a record's own number, which two finite doubles can carry past the largest one (1.7e308
 * + 1.7e308): stored, that is Infinity, which the reader's JSON would turn into null.
 */
function resolvedSum(base: number, own: number, index: number, field: string, what: string): number {
  const sum = base + own;
  if (!Number.isFinite(sum)) throw fieldError(index, field, `resolves to a ${what} beyond the range of a number`);
  return sum;
}

/** A record's fields, read as named properties: JSON.parse gives records of one shape one hidden class. */
interface SenmlRecord {
  bn?: unknown; bt?: unknown; bu?: unknown; bv?: unknown; bs?: unknown; bver?: unknown;
  n?: unknown; u?: unknown; v?: unknown; vs?: unknown; vb?: unknown; vd?: unknown; s?: unknown; t?: unknown; ut?: unknown;
}

function num(x: unknown, index: number, key: string): number | undefined {
  if (x === undefined) return undefined;
  if (typeof x !== 'number' || !Number.isFinite(x)) throw fieldError(index, key, 'must be a number');
  return x;
}

function str(x: unknown, index: number, key: string, max = MAX_NAME_CHARS): string | undefined {
  if (x === undefined) return undefined;
  if (typeof x !== 'string') throw fieldError(index, key, 'must be a string');
  if (x.length > max) throw fieldError(index, key, `must be at most ${max} characters`);
  // PostgreSQL text cannot hold NUL: refuse here rather than fail the whole batch later.
  if (x.includes('\u0000')) throw fieldError(index, key, 'must not contain NUL characters');
  // An unpaired surrogate escape ("\ud800") has no UTF-8 form: stored, it would read back as U+FFFD.
  if (!x.isWellFormed()) throw fieldError(index, key, UNPAIRED_SURROGATE);
  return x;
}

/** Printable ASCII without spaces, the usual unit ('Cel', '%RH', 'm/s2'), needs no regular expression. */
function plainAscii(u: string): boolean {
  for (let i = 0; i < u.length; i++) {
    const c = u.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

function unit(x: unknown, index: number, key: string): string | undefined {
  const u = str(x, index, key, MAX_UNIT_CHARS);
  if (u !== undefined && u !== '' && !plainAscii(u) && !UNIT_CHARS.test(u)) throw fieldError(index, key, 'must be printable text');
  return u;
}

/** Fields RFC 8428 defines (and 'l', links, which it leaves to extensions); others are ignored. */
const KNOWN = new Set(['bn', 'bt', 'bu', 'bv', 'bs', 'bver', 'n', 'u', 'v', 'vs', 'vb', 'vd', 's', 't', 'ut', 'l']);

/**
 * A label ending in '_' shows in the JSON text as `_"`, or behind an escape: a pack with neither cannot
 * hold one, and its records need no walk over their keys.
 */
function mayHoldMustUnderstand(text: string): boolean {
  return text.includes('_"') || text.includes('\\');
}

function checkKeys(rec: object, index: number): void {
  for (const key in rec) {
    // Labels ending in '_' are "must understand" (section 4.4): a recipient that does not know one rejects the pack.
    if (!KNOWN.has(key) && key.endsWith('_')) throw fieldError(index, key, 'is a must-understand field this service does not support');
  }
}

/**
 * Parses a SenML JSON pack and resolves it (section 4.6): base fields apply to their record and every
 * later one until replaced; name = bn + n, time = bt + t (absolute once >= 2^28, else relative to
 * `nowSeconds`), unit = u else bu, value = bv + v, sum = bs + s. Each record needs a valid name and
 * exactly one of v, vs, vb, vd, or a sum. Throws INVALID_INPUT naming the record index (0-based) and field.
 */
export function parseSenml(payload: Buffer | string, ctx: SenmlContext, limits: SenmlLimits, nowSeconds = Date.now() / 1000): StoredMessage[] {
  const text = typeof payload === 'string' ? payload : utf8Text(payload, 'payload');
  let pack: unknown;
  try {
    pack = JSON.parse(text);
  } catch {
    throw invalidInput('payload is not valid JSON');
  }
  if (!Array.isArray(pack)) throw invalidInput('payload must be a JSON array of SenML records');
  const count = pack.length;
  if (count === 0) throw invalidInput('payload must contain at least one SenML record');
  if (count > limits.maxRecords) throw invalidInput(`payload has ${count} records; at most ${limits.maxRecords} are accepted per message`);
  const walkKeys = mayHoldMustUnderstand(text);

  let bn = '';
  let bt = 0;
  let bu: string | null = null;
  let bv = 0;
  let bs = 0;
  let version: number | undefined;
  const out: StoredMessage[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const rec = pack[i] as SenmlRecord | null;
    if (rec === null || typeof rec !== 'object' || Array.isArray(rec)) throw invalidInput(`record ${i}: must be a JSON object`, { record: i });
    if (walkKeys) checkKeys(rec, i);

    if (rec.bver !== undefined) {
      const v = rec.bver;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw fieldError(i, 'bver', 'must be a positive integer');
      if (v > SENML_VERSION) throw fieldError(i, 'bver', `is ${v}; this service supports SenML versions up to ${SENML_VERSION}`);
      if (version !== undefined && v !== version) throw fieldError(i, 'bver', 'must be the same in every record of a pack');
      version = v;
    }
    const baseName = str(rec.bn, i, 'bn');
    if (baseName !== undefined) bn = baseName;
    const baseTime = num(rec.bt, i, 'bt');
    if (baseTime !== undefined) bt = baseTime;
    const baseUnit = unit(rec.bu, i, 'bu');
    if (baseUnit !== undefined) bu = baseUnit === '' ? null : baseUnit;
    const baseValue = num(rec.bv, i, 'bv');
    if (baseValue !== undefined) bv = baseValue;
    const baseSum = num(rec.bs, i, 'bs');
    if (baseSum !== undefined) bs = baseSum;

    const n = str(rec.n, i, 'n');
    const name = n === undefined ? bn : bn + n;
    if (name === '') throw fieldError(i, 'n', 'is required when there is no base name (bn)');
    if (name.length > MAX_NAME_CHARS) throw fieldError(i, n === undefined ? 'bn' : 'n', `must resolve to a name of at most ${MAX_NAME_CHARS} characters`);
    if (!validName(name)) {
      throw fieldError(i, n === undefined ? 'bn' : 'n', `resolves to '${name.slice(0, 64)}', which is not a valid SenML name (letters, digits and - : . / _, starting with a letter or digit)`);
    }
    const u = unit(rec.u, i, 'u');

    let values = 0;
    const v = num(rec.v, i, 'v');
    if (v !== undefined) values++;
    const vs = str(rec.vs, i, 'vs', Number.MAX_SAFE_INTEGER);
    if (vs !== undefined) values++;
    const vbRaw = rec.vb;
    if (vbRaw !== undefined) {
      if (typeof vbRaw !== 'boolean') throw fieldError(i, 'vb', 'must be a boolean');
      values++;
    }
    const vd = str(rec.vd, i, 'vd', Number.MAX_SAFE_INTEGER);
    if (vd !== undefined) {
      if (!DATA.test(vd)) throw fieldError(i, 'vd', 'must be base64url data without padding');
      values++;
    }
    if (values > 1) throw invalidInput(`record ${i}: has ${values} value fields; at most one of v, vs, vb, vd is allowed`, { record: i, field: 'v' });
    const s = num(rec.s, i, 's');
    if (values === 0 && s === undefined) throw invalidInput(`record ${i}: needs a value (v, vs, vb or vd) or a sum (s)`, { record: i, field: 'v' });

    const t = num(rec.t, i, 't');
    let time = t === undefined ? bt : resolvedSum(bt, t, i, 't', 'time (bt + t)');
    if (time < RELATIVE_TIME_LIMIT) time += nowSeconds;
    const ut = num(rec.ut, i, 'ut');
    if (ut !== undefined && ut < 0) throw fieldError(i, 'ut', 'must not be negative');

    out[i] = {
      channel: ctx.channel,
      publisher: ctx.publisher,
      protocol: ctx.protocol,
      subtopic: ctx.subtopic,
      name,
      unit: u === undefined || u === '' ? bu : u,
      time,
      value: v === undefined ? null : resolvedSum(bv, v, i, 'v', 'value (bv + v)'),
      stringValue: vs ?? null,
      boolValue: vbRaw === undefined ? null : vbRaw,
      dataValue: vd ?? null,
      sum: s === undefined ? null : resolvedSum(bs, s, i, 's', 'sum (bs + s)'),
      updateTime: ut ?? null,
    };
  }
  return out;
}

/**
 * Stored messages as fully resolved SenML records (RFC 8428 section 4.6: no base fields, absolute times):
 * what MQTT subscribers and CoAP observers get for messages that arrived over another protocol.
 */
export function toResolvedSenml(messages: readonly StoredMessage[]): Record<string, unknown>[] {
  return messages.map((m) => {
    const r: Record<string, unknown> = { n: m.name, t: m.time };
    if (m.unit) r.u = m.unit;
    if (m.value !== null) r.v = m.value;
    if (m.stringValue !== null) r.vs = m.stringValue;
    if (m.boolValue !== null) r.vb = m.boolValue;
    if (m.dataValue !== null) r.vd = m.dataValue;
    if (m.sum !== null) r.s = m.sum;
    if (m.updateTime !== null && m.updateTime !== undefined) r.ut = m.updateTime;
    return r;
  });
}
