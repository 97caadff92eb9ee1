// The cost of a selection: each field costs 1 (a JSON-typed one more: it may carry a stored document), and
// a page of a list counts its items, so the cost grows with limit × selection (across aliases, fragments
// and variables). Measured in time linear in the
// document: fragments come from a memo, each measured once against its own type condition.
import {
  Kind,
  getNamedType,
  getNullableType,
  isInterfaceType,
  isListType,
  isObjectType,
  isScalarType,
  type FieldNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/** What the measurement knows of the schema and the request; without it every field costs 1. */
export interface CostTyping {
  schema: GraphQLSchema;
  /** The page size of a list whose limit is not known: the largest a list may answer (SVC_LIST_MAX_LIMIT). */
  maxPageSize: number;
  /** What one JSON-typed field costs instead of 1: it may carry a whole stored document (SVC_GRAPHQL_JSON_FIELD_COST). */
  jsonFieldCost: number;
  /** The request's variables, defaults applied; absent while compiling (a variable limit counts at the maximum). */
  variables?: Readonly<Record<string, unknown>>;
}

export interface Measure {
  depth: number;
  /** Fields that are not lists, and lists that page themselves, with everything below them. */
  flat: number;
  /** List fields without a limit of their own: what each costs itself (1, or a JSON field's cost). */
  lists: number;
  /** One element of each of those lists: what a page around them multiplies by its size. */
  perElement: number;
  /** Some page size came from a variable: the cost depends on the request. */
  variable: boolean;
}

export const ZERO: Measure = Object.freeze({ depth: 0, flat: 0, lists: 0, perElement: 0, variable: false });

export const costOf = (m: Measure): number => m.flat + m.lists + m.perElement;

function fieldOf(parent: GraphQLNamedType | undefined, name: string): GraphQLField<unknown, unknown> | undefined {
  if (!parent || !(isObjectType(parent) || isInterfaceType(parent))) return undefined;
  return parent.getFields()[name];
}

/**
 * How many items a field with a `limit` argument may answer (null: the field takes no limit). A literal or a
 * given variable counts as the list will read it (clamped to 1..max); a limit not known counts at the maximum.
 */
function pageSize(def: GraphQLField<unknown, unknown>, node: FieldNode, typing: CostTyping): { size: number; variable: boolean } | null {
  const arg = def.args.find((a) => a.name === 'limit');
  if (!arg) return null;
  const given = node.arguments?.find((a) => a.name.value === 'limit')?.value;
  let value: unknown = arg.defaultValue;
  let variable = false;
  if (given?.kind === Kind.INT) value = Number(given.value);
  else if (given?.kind === Kind.VARIABLE) {
    variable = true;
    value = typing.variables ? typing.variables[given.name.value] : undefined;
  } else if (given) value = undefined;
  const size = typeof value === 'number' && Number.isFinite(value) ? Math.min(typing.maxPageSize, Math.max(1, Math.trunc(value))) : typing.maxPageSize;
  return { size, variable };
}

function add(into: Measure, m: Measure): void {
  into.depth = Math.max(into.depth, m.depth);
  into.flat += m.flat;
  into.lists += m.lists;
  into.perElement += m.perElement;
  into.variable ||= m.variable;
}

/** Depth and cost of a selection set against its parent type, fragments taken from the memo (each spread a lookup). */
export function measure(set: SelectionSetNode, parent: GraphQLNamedType | undefined, memo: Map<string, Measure>, typing: CostTyping | undefined): Measure {
  const out: Measure = { depth: 0, flat: 0, lists: 0, perElement: 0, variable: false };
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      const def = fieldOf(parent, sel.name.value);
      const named = def && getNamedType(def.type);
      const inner = sel.selectionSet ? measure(sel.selectionSet, named, memo, typing) : ZERO;
      const own = named && typing && isScalarType(named) && named.name === 'JSON' ? typing.jsonFieldCost : 1;
      out.depth = Math.max(out.depth, 1 + inner.depth);
      out.variable ||= inner.variable;
      const page = def && typing ? pageSize(def, sel, typing) : null;
      const listed = def !== undefined && isListType(getNullableType(def.type));
      if (page) out.variable ||= page.variable;
      // A list with a limit answers up to that many items; a page object ({ total items }) multiplies the
      // lists inside it. A list without a limit counts once (its size is the data's, bounded by the answer cap).
      if (page && listed) out.flat += own + page.size * costOf(inner);
      else if (page) out.flat += own + inner.flat + inner.lists + page.size * inner.perElement;
      else if (listed) {
        out.lists += own;
        out.perElement += costOf(inner);
      } else out.flat += own + costOf(inner);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      const type = sel.typeCondition && typing ? typing.schema.getType(sel.typeCondition.name.value) ?? undefined : parent;
      add(out, measure(sel.selectionSet, type, memo, typing));
    } else {
      const inner = memo.get(sel.name.value);
      if (inner) add(out, inner);
    }
  }
  return out;
}

/** The root type an operation selects from (undefined without a schema, or for a root the schema lacks). */
export function rootType(op: OperationDefinitionNode, typing: CostTyping | undefined): GraphQLNamedType | undefined {
  if (!typing) return undefined;
  return typing.schema.getRootType(op.operation) ?? undefined;
}

/** The variables as the operation sees them: its Int defaults where the request gives no value. */
export function withDefaults(op: OperationDefinitionNode, variables: Readonly<Record<string, unknown>> | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { ...variables };
  for (const def of op.variableDefinitions ?? []) {
    const name = def.variable.name.value;
    if (out[name] === undefined && def.defaultValue?.kind === Kind.INT) out[name] = Number(def.defaultValue.value);
  }
  return out;
}
