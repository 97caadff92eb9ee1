// Sizes of JSON values without serialising them: nesting depth and the bytes of their compact JSON text,
// each counted with an explicit stack (a value may nest deeper than the call stack goes) and stopped as
// soon as the bound the caller cares about is passed, so measuring a huge value costs no more than the bound.

/** The deepest nesting of a JSON value (objects and arrays), counted up to `max` + 1. */
export function jsonNesting(value: unknown, max: number): number {
  let deepest = 0;
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [v, depth] = pending.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    const level = depth + 1;
    if (level > deepest) {
      deepest = level;
      if (deepest > max) return deepest;
    }
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) pending.push([child, level]);
    }
  }
  return deepest;
}

// Strings count as their UTF-8 bytes and two quotes. The escapes JSON.stringify adds (one byte for '"' and
// '\\', up to five for a control character) are not counted: finding them costs ten times what counting the
// bytes does, and an answer's serialised text is measured exactly where it matters. Short strings (most
// keys and values) are counted in place: the native call costs more than the loop.
function stringBytes(s: string): number {
  const n = s.length;
  if (n > 32) return Buffer.byteLength(s, 'utf8') + 2;
  let bytes = n + 2;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    // 2 bytes below U+0800, 3 up to U+FFFF, 4 for a surrogate pair (2 per UTF-16 unit).
    if (c >= 0x80) bytes += c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

function scalarBytes(v: unknown): number {
  switch (typeof v) {
    case 'string': return stringBytes(v);
    case 'number': return v >= 0 && v < 10 && Number.isInteger(v) ? 1 : Number.isFinite(v) ? String(v).length : 4;
    case 'boolean': return v ? 4 : 5;
    case 'bigint': return String(v).length;
    default: return 4;
  }
}

/** Past this depth the walk goes on with an explicit stack: a value may nest deeper than the call stack goes. */
const RECURSION_DEPTH = 64;

interface Tally {
  total: number;
  readonly stop: number;
}

function walk(v: unknown, tally: Tally, depth: number): void {
  if (typeof v !== 'object' || v === null) {
    tally.total += scalarBytes(v);
  } else if (depth > RECURSION_DEPTH) {
    tally.total += deepBytes(v, tally.stop - tally.total);
  } else if (v instanceof Date) {
    tally.total += Number.isNaN(v.getTime()) ? 4 : 26;
  } else if (Array.isArray(v)) {
    tally.total += 2 + Math.max(0, v.length - 1);
    for (let i = 0; i < v.length && tally.total <= tally.stop; i++) {
      const child: unknown = v[i];
      walk(child === undefined || typeof child === 'function' ? null : child, tally, depth + 1);
    }
  } else {
    let members = 0;
    for (const key in v) {
      if (!Object.prototype.hasOwnProperty.call(v, key)) continue;
      const child = (v as Record<string, unknown>)[key];
      if (child === undefined || typeof child === 'function') continue;
      tally.total += stringBytes(key) + (members > 0 ? 2 : 1);
      members++;
      walk(child, tally, depth + 1);
      if (tally.total > tally.stop) return;
    }
    tally.total += 2;
  }
}

/** The same count with an explicit stack, for what nests deeper than RECURSION_DEPTH. */
function deepBytes(value: unknown, stopAbove: number): number {
  let total = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v !== 'object' || v === null) {
      total += scalarBytes(v);
    } else if (v instanceof Date) {
      total += Number.isNaN(v.getTime()) ? 4 : 26;
    } else if (Array.isArray(v)) {
      total += 2 + Math.max(0, v.length - 1);
      for (const child of v) pending.push(child === undefined || typeof child === 'function' ? null : child);
    } else {
      let members = 0;
      for (const key of Object.keys(v)) {
        const child = (v as Record<string, unknown>)[key];
        if (child === undefined || typeof child === 'function') continue;
        total += stringBytes(key) + 1;
        members++;
        pending.push(child);
      }
      total += 2 + Math.max(0, members - 1);
    }
    if (total > stopAbove) return total;
  }
  return total;
}

/**
 * The bytes of `JSON.stringify(value)` as UTF-8 (what a client receives), counted without building it and
 * without its escapes; the count stops once it passes `stopAbove` and is then only known to be larger.
 * Dates count as their ISO text; undefined and functions inside objects are left out, as JSON.stringify
 * leaves them.
 */
export function jsonBytes(value: unknown, stopAbove = Number.POSITIVE_INFINITY): number {
  const tally: Tally = { total: 0, stop: stopAbove };
  walk(value, tally, 0);
  return tally.total;
}

/** Whether a text is at most `max` bytes of UTF-8 (counted only when its length leaves doubt). */
export function utf8Within(text: string, max: number): boolean {
  if (text.length > max) return false;
  return text.length * 3 <= max || Buffer.byteLength(text, 'utf8') <= max;
}
