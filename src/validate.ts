// Input checks shared by every domain: each failure names the field and what was wrong.
import { isUtf8 } from 'node:buffer';
import { invalidInput } from './errors.js';
import { jsonBytes, jsonNesting } from './json-size.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ALIAS = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Bytes as text, refused unless they are UTF-8 (JSON's encoding, RFC 8259 8.1): decoding would put U+FFFD
 * in place of bad bytes, and the record stored would hold text the client never sent.
 */
export function utf8Text(bytes: Buffer, what: string): string {
  if (!isUtf8(bytes)) throw invalidInput(`${what} is not valid UTF-8`);
  return bytes.toString('utf8');
}

// A JSON escape can spell an unpaired UTF-16 surrogate ("\ud800"), which no UTF-8 text can hold: stored,
// it would read back as U+FFFD. Once the bytes are known UTF-8, only such an escape can make one, so a
// value is walked only when its text has one.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
export const UNPAIRED_SURROGATE = 'holds an unpaired surrogate escape (\\uD800-\\uDFFF), which is not Unicode text';

/** Refuses a parsed JSON value holding an unpaired surrogate in any string or key. */
export function wellFormedJson(text: string, value: unknown, what: string): void {
  if (!text.includes('\\u') || !SURROGATE_ESCAPE.test(text)) return;
  // An explicit stack: a body may nest deeper than the call stack goes.
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (!v.isWellFormed()) throw invalidInput(`${what} ${UNPAIRED_SURROGATE}`);
    } else if (typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) pending.push(key, (v as Record<string, unknown>)[key]);
    }
  }
}

// Not a type guard: a string that is no UUID would narrow to never on the false branch.
export function isUuid(value: unknown): boolean {
  return typeof value === 'string' && UUID.test(value);
}

/** A GraphQL ID argument that must be a UUID; anything else is a client error, not a database error. */
export function uuid(field: string, value: unknown): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw invalidInput(`${field} must be a UUID`);
  return value.toLowerCase();
}

export function optionalUuid(field: string, value: unknown): string | null {
  return value === undefined || value === null ? null : uuid(field, value);
}

export function name(field: string, value: unknown, max = 255): string {
  if (typeof value !== 'string' || value.trim() === '') throw invalidInput(`${field} must be a non-empty string`);
  if (value.length > max) throw invalidInput(`${field} must be at most ${max} characters`);
  return value;
}

export function optionalText(field: string, value: unknown, max = 4096): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalidInput(`${field} must be a string`);
  if (value.length > max) throw invalidInput(`${field} must be at most ${max} characters`);
  return value;
}

/** Route/slug aliases: lowercase letters, digits and inner hyphens, 1-63 characters, not UUID-shaped. */
export function alias(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !ALIAS.test(value)) {
    throw invalidInput(`${field} must be 1-63 lowercase letters, digits or inner hyphens`);
  }
  if (UUID.test(value)) throw invalidInput(`${field} must not look like a UUID`);
  return value;
}

export function jsonObject(field: string, value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw invalidInput(`${field} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** The bounds of every JSON document a caller stores (SVC_JSON_DOCUMENT_MAX_BYTES, SVC_JSON_DOCUMENT_MAX_DEPTH). */
export interface JsonBounds {
  maxBytes: number;
  maxDepth: number;
}

/**
 * A JSON value within the document bounds, or INVALID_INPUT naming the field and the bound it passes.
 * Depth first: it is cheap, and it keeps what follows (and PostgreSQL's jsonb parser) off deep recursion.
 */
export function boundedJson(field: string, value: unknown, bounds: JsonBounds): void {
  if (jsonNesting(value, bounds.maxDepth) > bounds.maxDepth) {
    throw invalidInput(`${field} nests deeper than ${bounds.maxDepth} levels, the maximum for a stored JSON document`);
  }
  // A count without escapes first (a lower bound that stops early on a huge value), then the exact text.
  if (jsonBytes(value, bounds.maxBytes) > bounds.maxBytes || Buffer.byteLength(JSON.stringify(value)) > bounds.maxBytes) {
    throw invalidInput(`${field} is larger than ${bounds.maxBytes} bytes of JSON, the maximum for a stored JSON document`);
  }
}

/** jsonObject for a document that is stored: also within the document bounds. */
export function jsonDocument(field: string, value: unknown, bounds: JsonBounds): Record<string, unknown> {
  const object = jsonObject(field, value);
  boundedJson(field, object, bounds);
  return object;
}

export function oneOf<T extends string>(field: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw invalidInput(`${field} must be one of ${allowed.join(', ')}`);
  }
  return value as T;
}

export function stringList(field: string, value: unknown, maxItems = 100, maxLength = 255): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v.length > maxLength)) {
    throw invalidInput(`${field} must be a list of strings of at most ${maxLength} characters`);
  }
  if (value.length > maxItems) throw invalidInput(`${field} must have at most ${maxItems} items`);
  return value as string[];
}

/** `omit to keep, null to clear` update semantics: undefined means "not given". */
export function given(input: Record<string, unknown>, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(input, key) && input[key] !== undefined;
}

export type DeletedFilter = 'live' | 'deleted' | 'all';
export const DELETED_FILTERS = ['live', 'deleted', 'all'] as const;
export const SORT_DIRS = ['asc', 'desc'] as const;
