// What an execution record may keep of a call: secrets redacted at any depth and in any letter case,
// text PostgreSQL can store, and a bounded size.

const SENSITIVE = ['password', 'secret', 'token', 'authorization', 'apikey', 'api_key', 'api-key'];
export const REDACTED = '<redacted>';
// Deeper than this the value is not copied at all: nothing below it can leak, and a hostile body cannot
// make the walk recurse without bound.
const MAX_DEPTH = 64;

/** A key naming a secret: it contains one of the sensitive words, in any case (clientSecret, X-API-Key). */
export function isSensitiveKey(key: string): boolean {
  const lower = key.toLowerCase();
  for (const word of SENSITIVE) if (lower.includes(word)) return true;
  return false;
}

/** PostgreSQL's text and jsonb refuse NUL and lone surrogates: a record keeps a replacement character. */
function storableText(s: string): string {
  const whole = s.isWellFormed() ? s : s.toWellFormed();
  return whole.includes('\u0000') ? whole.replaceAll('\u0000', '\uFFFD') : whole;
}

/** A copy of the value with every sensitive key's value replaced, at any depth. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return storableText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '<too deep>';
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    // defineProperty: a key named __proto__ stays a plain property of the copy.
    Object.defineProperty(out, storableText(key), {
      value: isSensitiveKey(key) ? REDACTED : redact(v, depth + 1), enumerable: true, writable: true, configurable: true,
    });
  }
  return out;
}

// A JSON text without these is kept as it is: nothing in it needs redacting, and PostgreSQL can store it
// (JSON.stringify writes NUL and lone surrogates as \u escapes, which jsonb refuses).
const NEEDS_WALK = /password|secret|token|authorization|apikey|api_key|api-key|\\u(?:0000|d[89a-f])/i;

/** The value's JSON text; undefined when it nests too deep for JSON.stringify (redact cuts it first then). */
function wholeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    return undefined;
  }
}

/**
 * The JSON text an execution record keeps of a value: redacted, storable, and at most maxBytes (else a
 * marker with the size and a redacted preview). `text` is the value's JSON when the caller has it
 * already; the value is only walked when that text holds something to redact or to replace.
 */
export function summaryText(value: unknown, maxBytes: number, text?: string): string {
  let out = text ?? wholeJson(value);
  if (out === undefined || NEEDS_WALK.test(out)) out = JSON.stringify(redact(value)) ?? 'null';
  if (out.length <= maxBytes / 3) return out;
  const bytes = Buffer.byteLength(out);
  if (bytes <= maxBytes) return out;
  return JSON.stringify({ truncated: true, bytes, preview: out.slice(0, Math.floor(maxBytes / 2)).toWellFormed() });
}

/** An error message kept in a record: bounded, storable. */
export function boundedMessage(message: string, max = 1000): string {
  const text = storableText(message);
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
