// ABAC conditions: validation of stored condition objects, compilation to a flat list, evaluation.
// Keys are dot-paths; a literal means eq; an object of operators selects them; all conditions must hold;
// a missing field never matches, whatever the operator (neq included).
import { invalidInput } from '../errors.js';

export const OPERATORS = ['eq', 'neq', 'contains', 'in', 'gt', 'gte', 'lt', 'lte'] as const;
export type Operator = (typeof OPERATORS)[number];
const OPERATOR_SET: ReadonlySet<string> = new Set(OPERATORS);

export type Root = 'entity' | 'resource' | 'object' | 'tenant' | 'context';

/** SPEC.md "Access model records": the fields a condition may reference. */
const EXACT_FIELDS: ReadonlySet<string> = new Set([
  'entity.id', 'entity.kind', 'entity.tenant_id', 'entity.status',
  'resource.id', 'resource.kind', 'resource.tenant_id',
  'tenant.id', 'tenant.status',
  'object.kind', 'object.type', 'object.id', 'object.tenant_id',
  'context.ip', 'context.method', 'context.client_id', 'context.mfa_verified', 'context.time',
]);
const ATTRIBUTE_PREFIXES = ['entity.attributes.', 'resource.attributes.', 'tenant.attributes.', 'object.attributes.'];

export interface Condition {
  key: string;
  root: Root;
  /** Path below the root: ['attributes', 'site'] for entity.attributes.site. */
  path: string[];
  op: Operator;
  operand: unknown;
}

export interface CompiledConditions {
  list: Condition[];
  usesContext: boolean;
}

/** The data conditions read, by root; any of them may be absent (a kind-level object has no attributes). */
export interface ConditionInput {
  entity: Record<string, unknown> | undefined;
  object: Record<string, unknown> | undefined;
  resource: Record<string, unknown> | undefined;
  tenant: Record<string, unknown> | undefined;
  context: Record<string, unknown> | undefined;
}

export function isReferencable(key: string): boolean {
  if (EXACT_FIELDS.has(key)) return true;
  return ATTRIBUTE_PREFIXES.some((p) => key.length > p.length && key.startsWith(p) && !key.endsWith('.') && !key.includes('..'));
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isOperatorForm(v: unknown): v is Record<string, unknown> {
  if (!isPlainObject(v)) return false;
  const keys = Object.keys(v);
  return keys.length > 0 && keys.every((k) => OPERATOR_SET.has(k));
}

/**
 * The check the management API runs before storing conditions (blocks and token ceilings), so a
 * mistake is reported at write time instead of silently never matching.
 */
export function validateConditions(conditions: unknown, field = 'conditions'): Record<string, unknown> {
  if (conditions === undefined || conditions === null) return {};
  if (!isPlainObject(conditions)) throw invalidInput(`${field} must be a JSON object`);
  for (const [key, value] of Object.entries(conditions)) {
    if (!isReferencable(key)) throw invalidInput(`${field}: '${key}' is not a referencable field`);
    if (isPlainObject(value)) {
      const keys = Object.keys(value);
      const unknown = keys.filter((k) => !OPERATOR_SET.has(k));
      if (keys.length === 0 || unknown.length > 0) {
        throw invalidInput(`${field}: '${key}' uses unknown operator(s) ${unknown.map((u) => `'${u}'`).join(', ') || '(none given)'}; expected one of ${OPERATORS.join(', ')}`);
      }
      if ('in' in value && !Array.isArray(value.in)) throw invalidInput(`${field}: '${key}' operator 'in' needs an array`);
      for (const op of ['gt', 'gte', 'lt', 'lte'] as const) {
        if (op in value && typeof value[op] !== 'number' && typeof value[op] !== 'string') {
          throw invalidInput(`${field}: '${key}' operator '${op}' needs a number or a string`);
        }
      }
    }
  }
  return conditions;
}

/** Compiles stored conditions; null when there are none (the common case costs nothing at evaluation). */
export function compileConditions(conditions: unknown): CompiledConditions | null {
  if (!isPlainObject(conditions)) return null;
  const list: Condition[] = [];
  let usesContext = false;
  for (const [key, value] of Object.entries(conditions)) {
    const [root, ...path] = key.split('.');
    const known = root === 'entity' || root === 'resource' || root === 'object' || root === 'tenant' || root === 'context';
    // A key nobody can reference compiles to a condition that never holds: stored data cannot widen access.
    const safeRoot = (known ? root : 'context') as Root;
    const safePath = known && isReferencable(key) ? path : ['\u0000unreferencable'];
    if (safeRoot === 'context') usesContext = true;
    if (isOperatorForm(value)) {
      for (const [op, operand] of Object.entries(value)) list.push({ key, root: safeRoot, path: safePath, op: op as Operator, operand });
    } else {
      list.push({ key, root: safeRoot, path: safePath, op: 'eq', operand: value });
    }
  }
  return list.length === 0 ? null : { list, usesContext };
}

const hasOwn = Object.prototype.hasOwnProperty;

/** undefined = missing (absent key anywhere on the path); null is a present value. */
export function resolveField(input: ConditionInput, root: Root, path: string[]): unknown {
  let value: unknown = input[root];
  for (let i = 0; i < path.length; i++) {
    if (!isPlainObject(value)) return undefined;
    const key = path[i] as string;
    if (!hasOwn.call(value, key)) return undefined;
    value = value[key];
  }
  return value;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => equal(x, bb[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => hasOwn.call(b, k) && equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function ordered(a: unknown, b: unknown): a is number | string {
  return (typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string');
}

export function testCondition(c: Condition, input: ConditionInput): boolean {
  const value = resolveField(input, c.root, c.path);
  if (value === undefined) return false;
  const operand = c.operand;
  switch (c.op) {
    case 'eq': return equal(value, operand);
    case 'neq': return !equal(value, operand);
    case 'contains':
      if (typeof value === 'string') return typeof operand === 'string' && value.includes(operand);
      if (Array.isArray(value)) return value.some((v) => equal(v, operand));
      return false;
    case 'in': return Array.isArray(operand) && operand.some((o) => equal(value, o));
    case 'gt': return ordered(value, operand) && value > (operand as typeof value);
    case 'gte': return ordered(value, operand) && value >= (operand as typeof value);
    case 'lt': return ordered(value, operand) && value < (operand as typeof value);
    case 'lte': return ordered(value, operand) && value <= (operand as typeof value);
    default: return false;
  }
}

export function conditionsHold(compiled: CompiledConditions, input: ConditionInput): boolean {
  const list = compiled.list;
  for (let i = 0; i < list.length; i++) if (!testCondition(list[i] as Condition, input)) return false;
  return true;
}

/** For explain: the first condition that fails, described for a person. */
export function firstFailure(compiled: CompiledConditions, input: ConditionInput): string | null {
  for (const c of compiled.list) {
    if (testCondition(c, input)) continue;
    const value = resolveField(input, c.root, c.path);
    const expected = `${c.op} ${JSON.stringify(c.operand)}`;
    return value === undefined
      ? `condition '${c.key}' (${expected}) failed: field is missing`
      : `condition '${c.key}' (${expected}) failed: value is ${JSON.stringify(value)}`;
  }
  return null;
}
