// What of a custom endpoint call is secret, by what a value is rather than what it is called: the
// endpoint's operation is walked once against the schema's @secret marks (src/graphql/secret.ts) into a
// plan, which redacts the variables and the shaped response an execution record keeps.
import {
  Kind,
  TypeInfo,
  getNamedType,
  isCompositeType,
  isInputObjectType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  parse,
  typeFromAST,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { inputHoldsSecret, isSecret } from '../graphql/secret.js';
import type { ResponsePlan, VariablesPlan } from './mapping.js';
import { REDACTED } from './redaction.js';

/** Response keys whose value is secret (true) or holds secrets further down; lists are transparent. */
export type SecretTree = Map<string, SecretTree | true>;

export interface SecretPlan {
  /** The operation could not be walked (it does not validate): every variable's value is redacted. */
  allVariables: boolean;
  /** Variables that feed a secret argument or input field, in whole. */
  whole: ReadonlySet<string>;
  /** Variables of an input type with secret fields: those fields are redacted wherever they sit. */
  typed: ReadonlyMap<string, GraphQLInputType>;
  /** Variable paths a request header fills: every header value mapped into variables is redacted. */
  headerTargets: readonly (readonly string[])[];
  /** The secret parts of the shaped response; null when there are none. */
  response: SecretTree | null;
}

/** True when nothing of a call's variables needs redacting by this plan. */
function variablesClear(plan: SecretPlan): boolean {
  return !plan.allVariables && plan.whole.size === 0 && plan.typed.size === 0 && plan.headerTargets.length === 0;
}

// Deeper than this a value is not walked: the execution log cuts it anyway (redaction.ts) and a hostile
// value must not make the walk recurse without bound.
const MAX_DEPTH = 64;
const TOO_DEEP = '<too deep>';

function mergeInto(into: SecretTree, from: SecretTree): void {
  for (const [key, value] of from) {
    const have = into.get(key);
    if (have === true) continue;
    if (value === true) into.set(key, true);
    else if (have === undefined) {
      // A copy: the subtree may be a fragment's, which other paths merge into as well.
      const copy: SecretTree = new Map();
      mergeInto(copy, value);
      into.set(key, copy);
    } else mergeInto(have, value);
  }
}

interface Walk {
  schema: GraphQLSchema;
  fragments: Map<string, FragmentDefinitionNode>;
  /** Each fragment's tree, worked out once however often it is spread. */
  fragmentTrees: Map<string, SecretTree>;
}

/** The secret response keys under a selection set of `parent`. */
function outputTree(walk: Walk, selectionSet: SelectionSetNode, parent: GraphQLNamedType | undefined): SecretTree {
  const tree: SecretTree = new Map();
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const fields = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields() : undefined;
      const def = fields?.[selection.name.value];
      if (!def) continue;
      const key = selection.alias?.value ?? selection.name.value;
      if (isSecret(def)) {
        tree.set(key, true);
        continue;
      }
      const named = getNamedType(def.type);
      if (!selection.selectionSet || !isCompositeType(named)) continue;
      const sub = outputTree(walk, selection.selectionSet, named);
      if (sub.size > 0) mergeInto(tree, new Map([[key, sub]]));
    } else if (selection.kind === Kind.FRAGMENT_SPREAD) {
      mergeInto(tree, fragmentTree(walk, selection.name.value));
    } else {
      const condition = selection.typeCondition?.name.value;
      mergeInto(tree, outputTree(walk, selection.selectionSet, condition ? (walk.schema.getType(condition) ?? undefined) : parent));
    }
  }
  return tree;
}

function fragmentTree(walk: Walk, name: string): SecretTree {
  const known = walk.fragmentTrees.get(name);
  if (known) return known;
  // Empty while it is worked out: a cycle (which validation refuses anyway) adds nothing.
  walk.fragmentTrees.set(name, new Map());
  const fragment = walk.fragments.get(name);
  const tree = fragment ? outputTree(walk, fragment.selectionSet, walk.schema.getType(fragment.typeCondition.name.value) ?? undefined) : new Map();
  walk.fragmentTrees.set(name, tree);
  return tree;
}

/** Variables written where a secret argument or input field takes them, however deep in a literal. */
function secretVariableUses(schema: GraphQLSchema, document: DocumentNode): Set<string> {
  const found = new Set<string>();
  const walk = (node: ValueNode, type: GraphQLInputType | undefined, secret: boolean): void => {
    if (node.kind === Kind.VARIABLE) {
      if (secret) found.add(node.name.value);
    } else if (node.kind === Kind.LIST) {
      const item = type && isNonNullType(type) ? type.ofType : type;
      for (const v of node.values) walk(v, item && isListType(item) ? item.ofType : item, secret);
    } else if (node.kind === Kind.OBJECT) {
      const named = type ? getNamedType(type) : undefined;
      const fields = named && isInputObjectType(named) ? named.getFields() : undefined;
      for (const f of node.fields) {
        const def = fields?.[f.name.value];
        walk(f.value, def?.type, secret || isSecret(def));
      }
    }
  };
  const typeInfo = new TypeInfo(schema);
  visit(document, visitWithTypeInfo(typeInfo, {
    Field(node) {
      const def = typeInfo.getFieldDef();
      for (const arg of node.arguments ?? []) {
        const argDef = def?.args.find((a) => a.name === arg.name.value);
        walk(arg.value, argDef?.type, isSecret(argDef));
      }
    },
  }));
  return found;
}

/**
 * Where a responseMapping puts the secret parts of data: `$.a.b` under key k carries data.a.b's tree
 * (a numeric step indexes a list, which the tree does not count).
 */
function shapedTree(tree: SecretTree, mapping: ResponsePlan): SecretTree | null {
  if (mapping.whole) return tree.size > 0 ? tree : null;
  const out: SecretTree = new Map();
  for (const { key, path } of mapping.fields) {
    if (path === null) continue;
    let node: SecretTree | true = tree;
    for (const part of path) {
      if (node === true) break;
      const next: SecretTree | true | undefined = node.get(part);
      if (next !== undefined) node = next;
      else if (!/^(0|[1-9]\d*)$/.test(part)) {
        node = new Map();
        break;
      }
    }
    if (node === true || node.size > 0) out.set(key, node);
  }
  return out.size > 0 ? out : null;
}

/**
 * The secret plan of an endpoint's operation. `valid` is false when the operation does not validate
 * against the schema: nothing can be said of its variables, so all of them are redacted.
 */
export function planSecrets(
  schema: GraphQLSchema, graphql: string, valid: boolean, variables: VariablesPlan, response: ResponsePlan,
): SecretPlan {
  const headerTargets = variables.targets.filter((t) => t.source.from === 'header').map((t) => t.keys);
  const none: SecretPlan = { allVariables: true, whole: new Set(), typed: new Map(), headerTargets, response: null };
  if (!valid) return none;
  let document: DocumentNode;
  try {
    document = parse(graphql, { noLocation: true });
  } catch {
    return none;
  }
  const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (!operation) return none;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const typed = new Map<string, GraphQLInputType>();
  for (const v of operation.variableDefinitions ?? []) {
    const type = typeFromAST(schema, v.type) as GraphQLInputType | undefined;
    if (type && inputHoldsSecret(type)) typed.set(v.variable.name.value, type);
  }
  const root = operation.operation === 'mutation' ? schema.getMutationType() : schema.getQueryType();
  const data = outputTree({ schema, fragments, fragmentTrees: new Map() }, operation.selectionSet, root ?? undefined);
  return { allVariables: false, whole: secretVariableUses(schema, document), typed, headerTargets, response: shapedTree(data, response) };
}

/** A copy of a JSON object with own property `key` set (a key named __proto__ stays a plain property). */
function withKey(obj: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const copy = { ...obj };
  Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const has = (obj: Record<string, unknown>, key: string) => Object.prototype.hasOwnProperty.call(obj, key);

/** The value with every secret input field of its type redacted (lists walked; a single value may stand for one). */
function redactByType(value: unknown, type: GraphQLInputType, depth: number): unknown {
  if (value === null || value === undefined) return value;
  if (depth >= MAX_DEPTH) return TOO_DEEP;
  if (isNonNullType(type)) return redactByType(value, type.ofType, depth);
  if (isListType(type)) {
    return Array.isArray(value) ? value.map((v) => redactByType(v, type.ofType, depth + 1)) : redactByType(value, type.ofType, depth + 1);
  }
  if (!isInputObjectType(type) || !isRecord(value) || !inputHoldsSecret(type)) return value;
  let out = value;
  for (const field of Object.values(type.getFields())) {
    if (!has(value, field.name)) continue;
    if (isSecret(field)) out = withKey(out, field.name, REDACTED);
    else if (inputHoldsSecret(field.type)) out = withKey(out, field.name, redactByType(value[field.name], field.type, depth + 1));
  }
  return out;
}

/** The value with the one at `keys` redacted, copied along the way. */
function redactAt(value: unknown, keys: readonly string[], i = 0): unknown {
  if (!isRecord(value) || !has(value, keys[i] as string)) return value;
  const key = keys[i] as string;
  return withKey(value, key, i === keys.length - 1 ? REDACTED : redactAt(value[key], keys, i + 1));
}

/** The variables an execution record may keep of a call. */
export function redactVariables(plan: SecretPlan, variables: unknown): unknown {
  if (!isRecord(variables) || variablesClear(plan)) return variables;
  let out: Record<string, unknown> = variables;
  for (const name of Object.keys(variables)) {
    if (plan.allVariables || plan.whole.has(name)) out = withKey(out, name, REDACTED);
    else {
      const type = plan.typed.get(name);
      if (type) out = withKey(out, name, redactByType(variables[name], type, 0));
    }
  }
  for (const keys of plan.headerTargets) out = redactAt(out, keys) as Record<string, unknown>;
  return out;
}

/** The data with every value the tree marks secret redacted (null stays null: nothing was handed out). */
function redactTree(value: unknown, tree: SecretTree, depth: number): unknown {
  if (depth >= MAX_DEPTH) return TOO_DEEP;
  if (Array.isArray(value)) return value.map((v) => redactTree(v, tree, depth + 1));
  if (!isRecord(value)) return value;
  let out = value;
  for (const [key, sub] of tree) {
    if (!has(value, key) || value[key] === null) continue;
    out = withKey(out, key, sub === true ? REDACTED : redactTree(value[key], sub, depth + 1));
  }
  return out;
}

// graphql-js and graphql-jit quote a variable's value in a coercion error ('Variable "$p" got invalid
// value 12345; ...'), and name a nested input field as if it were a variable ('Variable "$key" ...').
const VARIABLE_VALUE_ERROR = /^(Variable "\$[^"]*" got invalid value)[\s\S]*$/;

/**
 * The response an execution record may keep: a success's shaped response with its secret parts
 * redacted, or a failure's GraphQL errors with no variable value quoted when any variable may be secret.
 */
export function redactResponse(plan: SecretPlan, response: unknown, success: boolean): unknown {
  if (success) return plan.response ? redactTree(response, plan.response, 0) : response;
  if (variablesClear(plan) || !isRecord(response) || !Array.isArray(response.errors)) return response;
  return {
    ...response,
    errors: response.errors.map((e: unknown) => {
      if (!isRecord(e) || typeof e.message !== 'string' || !VARIABLE_VALUE_ERROR.test(e.message)) return e;
      return { ...e, message: e.message.replace(VARIABLE_VALUE_ERROR, `$1 ${REDACTED}`) };
    }),
  };
}
