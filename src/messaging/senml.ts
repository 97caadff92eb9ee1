// SenML (RFC 8428) JSON packs parsed, validated and resolved into stored messages in one pass.
import { invalidInput, type AppError } from '../errors.js';
import type { Protocol, StoredMessage } from './types.js';

/** RFC 8428 is version 10; earlier drafts' packs (lower versions) use a subset of the same fields. */
export const SENML_VERSION = 10;
/** Resolved times below 2^28 are relative to the receive time (RFC 8428 section 4.5.3). */
const RELATIVE_TIME_LIMIT = 268_435_456;
/** Names, units and base names: long enough for any sane sensor path, short enough to bound a row. */
const MAX_NAME_CHARS = 512;
// RFC 8428 section 4.5.1: the resolved name's character set, starting with a letter or digit.
const NAME = /^[A-Za-z0-9][A-Za-z0-9:./_-]*$/;
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

function num(rec: Record<string, unknown>, key: string, index: number): number | undefined {
  const x = rec[key];
  if (x === undefined) return undefined;
  if (typeof x !== 'number' || !Number.isFinite(x)) throw fieldError(index, key, 'must be a number');
  return x;
}

function str(rec: Record<string, unknown>, key: string, index: number, max = MAX_NAME_CHARS): string | undefined {
  const x = rec[key];
  if (x === undefined) return undefined;
  if (typeof x !== 'string') throw fieldError(index, key, 'must be a string');
  if (x.length > max) throw fieldError(index, key, `must be at most ${max} characters`);
  // PostgreSQL text cannot hold NUL: refuse here rather than fail the whole batch later.
  if (x.includes('\u0000')) throw fieldError(index, key, 'must not contain NUL characters');
  return x;
}

function unit(rec: Record<string, unknown>, key: string, index: number): string | undefined {
  const u = str(rec, key, index, MAX_UNIT_CHARS);
  if (u !== undefined && u !== '' && !UNIT_CHARS.test(u)) throw fieldError(index, key, 'must be printable text');
  return u;
}

/** Fields RFC 8428 defines (and 'l', links, which it leaves to extensions); others are ignored. */
const KNOWN = new Set(['bn', 'bt', 'bu', 'bv', 'bs', 'bver', 'n', 'u', 'v', 'vs', 'vb', 'vd', 's', 't', 'ut', 'l']);

function checkKeys(rec: Record<string, unknown>, index: number): void {
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
  let pack: unknown;
  try {
    pack = JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8'));
  } catch {
    throw invalidInput('payload is not valid JSON');
  }
  if (!Array.isArray(pack)) throw invalidInput('payload must be a JSON array of SenML records');
  const count = pack.length;
  if (count === 0) throw invalidInput('payload must contain at least one SenML record');
  if (count > limits.maxRecords) throw invalidInput(`payload has ${count} records; at most ${limits.maxRecords} are accepted per message`);

  let bn = '';
  let bt = 0;
  let bu: string | null = null;
  let bv = 0;
  let bs = 0;
  let version: number | undefined;
  const out: StoredMessage[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const rec = pack[i] as Record<string, unknown>;
    if (rec === null || typeof rec !== 'object' || Array.isArray(rec)) throw invalidInput(`record ${i}: must be a JSON object`, { record: i });
    checkKeys(rec, i);

    if (rec.bver !== undefined) {
      const v = rec.bver;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw fieldError(i, 'bver', 'must be a positive integer');
      if (v > SENML_VERSION) throw fieldError(i, 'bver', `is ${v}; this service supports SenML versions up to ${SENML_VERSION}`);
      if (version !== undefined && v !== version) throw fieldError(i, 'bver', 'must be the same in every record of a pack');
      version = v;
    }
    const baseName = str(rec, 'bn', i);
    if (baseName !== undefined) bn = baseName;
    const baseTime = num(rec, 'bt', i);
    if (baseTime !== undefined) bt = baseTime;
    const baseUnit = unit(rec, 'bu', i);
    if (baseUnit !== undefined) bu = baseUnit === '' ? null : baseUnit;
    const baseValue = num(rec, 'bv', i);
    if (baseValue !== undefined) bv = baseValue;
    const baseSum = num(rec, 'bs', i);
    if (baseSum !== undefined) bs = baseSum;

    const n = str(rec, 'n', i);
    const name = n === undefined ? bn : bn + n;
    if (name === '') throw fieldError(i, 'n', 'is required when there is no base name (bn)');
    if (name.length > MAX_NAME_CHARS) throw fieldError(i, n === undefined ? 'bn' : 'n', `must resolve to a name of at most ${MAX_NAME_CHARS} characters`);
    if (!NAME.test(name)) {
      throw fieldError(i, n === undefined ? 'bn' : 'n', `resolves to '${name.slice(0, 64)}', which is not a valid SenML name (letters, digits and - : . / _, starting with a letter or digit)`);
    }
    const u = unit(rec, 'u', i);

    let values = 0;
    const v = num(rec, 'v', i);
    if (v !== undefined) values++;
    const vs = str(rec, 'vs', i, Number.MAX_SAFE_INTEGER);
    if (vs !== undefined) values++;
    const vbRaw = rec.vb;
    if (vbRaw !== undefined) {
      if (typeof vbRaw !== 'boolean') throw fieldError(i, 'vb', 'must be a boolean');
      values++;
    }
    const vd = str(rec, 'vd', i, Number.MAX_SAFE_INTEGER);
    if (vd !== undefined) {
      if (!DATA.test(vd)) throw fieldError(i, 'vd', 'must be base64url data without padding');
      values++;
    }
    if (values > 1) throw invalidInput(`record ${i}: has ${values} value fields; at most one of v, vs, vb, vd is allowed`, { record: i, field: 'v' });
    const s = num(rec, 's', i);
    if (values === 0 && s === undefined) throw invalidInput(`record ${i}: needs a value (v, vs, vb or vd) or a sum (s)`, { record: i, field: 'v' });

    const t = num(rec, 't', i);
    let time = t === undefined ? bt : bt + t;
    if (time < RELATIVE_TIME_LIMIT) time += nowSeconds;
    const ut = num(rec, 'ut', i);
    if (ut !== undefined && ut < 0) throw fieldError(i, 'ut', 'must not be negative');

    out[i] = {
      channel: ctx.channel,
      publisher: ctx.publisher,
      protocol: ctx.protocol,
      subtopic: ctx.subtopic,
      name,
      unit: u === undefined || u === '' ? bu : u,
      time,
      value: v === undefined ? null : bv + v,
      stringValue: vs ?? null,
      boolValue: vbRaw === undefined ? null : (vbRaw as boolean),
      dataValue: vd ?? null,
      sum: s === undefined ? null : bs + s,
      updateTime: ut ?? null,
    };
  }
  return out;
}
