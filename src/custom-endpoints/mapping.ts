// variablesMapping and responseMapping (SPEC.md "Custom endpoint calls"): checked and compiled once when
// an endpoint is saved or loaded into the routing table, applied per call without re-reading the JSON.
import { invalidInput } from '../errors.js';

/** What a call offers to a variablesMapping source. */
export interface MappingInput {
  body: unknown;
  /** Raw query string (no '?'). */
  query: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  auth: { entityId: string; tenantId: string | null; sessionId: string | null };
  path: string;
}

type Source =
  | { from: 'literal'; value: unknown }
  | { from: 'body'; path: string[] }
  | { from: 'query'; name: string }
  | { from: 'header'; name: string }
  | { from: 'auth'; field: 'entityId' | 'tenantId' | 'sessionId' }
  | { from: 'path' };

interface Target {
  /** The dotted key split: ['input', 'name'] builds {input: {name}}. */
  keys: string[];
  source: Source;
}

/** A compiled variablesMapping; `forwardBody` for {} (the whole body is the variables). */
export interface VariablesPlan {
  forwardBody: boolean;
  targets: Target[];
}

const SOURCES = '$body, $body.<path>, $query.<name>, $headers.<name>, $auth.entityId, $auth.tenantId, $auth.sessionId or $path';
const AUTH_FIELDS = new Set(['entityId', 'tenantId', 'sessionId']);
// A '$' followed by a letter reads as a source expression; anything else ('$5', 'plain') is a literal.
const LOOKS_LIKE_SOURCE = /^\$[A-Za-z]/;

// Keys that would reach an object's prototype instead of becoming a property of it.
const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function dottedKeys(field: string, key: string): string[] {
  const keys = key.split('.');
  if (key === '' || keys.some((k) => k === '')) throw invalidInput(`${field} key '${key}' must be a name or dotted names (input.name)`);
  if (keys.some((k) => RESERVED_KEYS.has(k))) throw invalidInput(`${field} key '${key}' uses a reserved name`);
  return keys;
}

function sourceOf(field: string, value: unknown): Source {
  // Nested objects, numbers, booleans, null: literals, taken as they are (not interpolated).
  if (typeof value !== 'string' || !LOOKS_LIKE_SOURCE.test(value)) return { from: 'literal', value };
  if (value === '$body') return { from: 'body', path: [] };
  if (value === '$path') return { from: 'path' };
  const dot = value.indexOf('.');
  const root = dot === -1 ? value : value.slice(0, dot);
  const rest = dot === -1 ? '' : value.slice(dot + 1);
  if (rest !== '' && !rest.split('.').includes('')) {
    if (root === '$body') return { from: 'body', path: rest.split('.') };
    if (root === '$query') return { from: 'query', name: rest };
    if (root === '$headers') return { from: 'header', name: rest.toLowerCase() };
    if (root === '$auth' && AUTH_FIELDS.has(rest)) return { from: 'auth', field: rest as 'entityId' };
  }
  throw invalidInput(`${field} has an unsupported source '${value}'; expected ${SOURCES}, or a literal`);
}

/** Checks a variablesMapping (naming the bad entry) and compiles it. */
export function compileVariables(mapping: Record<string, unknown>): VariablesPlan {
  const targets: Target[] = [];
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(mapping)) {
    const field = `variablesMapping.${key}`;
    const keys = dottedKeys('variablesMapping', key);
    // 'input' and 'input.name' cannot both be set: one would overwrite the other's value.
    for (let i = 1; i <= keys.length; i++) {
      const prefix = keys.slice(0, i).join('.');
      const other = seen.get(prefix);
      if (other !== undefined && (i === keys.length || other === 'leaf')) {
        throw invalidInput(`variablesMapping keys '${key}' and '${prefix}' overlap`);
      }
      seen.set(prefix, i === keys.length ? 'leaf' : (seen.get(prefix) ?? 'branch'));
    }
    targets.push({ keys, source: sourceOf(field, value) });
  }
  return { forwardBody: targets.length === 0, targets };
}

function pick(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const part of path) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9]\d*)$/.test(part)) return undefined;
      current = current[Number(part)];
    } else if (typeof current === 'object' && current !== null && Object.prototype.hasOwnProperty.call(current, part)) {
      current = (current as Record<string, unknown>)[part];
    } else {
      return undefined;
    }
  }
  return current;
}

function queryParam(query: string, name: string): string | undefined {
  if (query === '') return undefined;
  const value = new URLSearchParams(query).get(name);
  return value === null ? undefined : value;
}

function resolve(source: Source, input: MappingInput): unknown {
  switch (source.from) {
    case 'literal': return source.value;
    case 'body': return source.path.length === 0 ? input.body : pick(input.body, source.path);
    case 'query': return queryParam(input.query, source.name);
    case 'header': return input.headers[source.name];
    case 'auth': return input.auth[source.field] ?? undefined;
    case 'path': return input.path;
  }
}

/**
 * The GraphQL variables of a call. A source that resolves to nothing omits its variable (never null);
 * {} forwards the body, which must then be a JSON object.
 */
export function buildVariables(plan: VariablesPlan, input: MappingInput): Record<string, unknown> {
  if (plan.forwardBody) {
    const body = input.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw invalidInput('custom endpoint request body must be a JSON object: the endpoint forwards it as the GraphQL variables');
    }
    return body as Record<string, unknown>;
  }
  const variables: Record<string, unknown> = {};
  for (const { keys, source } of plan.targets) {
    const value = resolve(source, input);
    if (value === undefined) continue;
    let node = variables;
    for (let i = 0; i < keys.length - 1; i++) {
      const key = keys[i] as string;
      let next = node[key];
      if (typeof next !== 'object' || next === null) node[key] = next = {};
      node = next as Record<string, unknown>;
    }
    node[keys[keys.length - 1] as string] = value;
  }
  return variables;
}

/** A compiled responseMapping; `whole` for {} (the data object as it is). */
export interface ResponsePlan {
  whole: boolean;
  fields: { key: string; path: string[] | null; literal: unknown }[];
}

/** Checks a responseMapping ($.a.b picks data.a.b; anything without '$.' is a literal) and compiles it. */
export function compileResponse(mapping: Record<string, unknown>): ResponsePlan {
  const fields: ResponsePlan['fields'] = [];
  for (const [key, value] of Object.entries(mapping)) {
    if (RESERVED_KEYS.has(key)) throw invalidInput(`responseMapping key '${key}' uses a reserved name`);
    if (typeof value === 'string' && value.startsWith('$.')) {
      const path = value.slice(2).split('.');
      if (path.some((p) => p === '')) throw invalidInput(`responseMapping.${key} path '${value}' must be $.<field> or $.<field>.<field>...`);
      fields.push({ key, path, literal: undefined });
    } else {
      fields.push({ key, path: null, literal: value });
    }
  }
  return { whole: fields.length === 0, fields };
}

/** The response of a call: picks from data (a missing path yields null), literals as they are. */
export function shapeResponse(plan: ResponsePlan, data: unknown): unknown {
  if (plan.whole) return data;
  const out: Record<string, unknown> = {};
  for (const { key, path, literal } of plan.fields) {
    out[key] = path === null ? literal : (pick(data, path) ?? null);
  }
  return out;
}
