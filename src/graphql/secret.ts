// The @secret directive of the schema: which output fields, arguments and input fields hold secrets
// (passwords, keys, tokens), so records of operations can redact them by position, not by name.
import {
  getNamedType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  type ConstDirectiveNode,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
} from 'graphql';

export const SECRET_DIRECTIVE = 'secret';

/** A schema element as built from SDL: its definition node carries the directives written on it. */
interface Defined {
  readonly astNode?: { readonly directives?: readonly ConstDirectiveNode[] } | null;
}

/** True when the field, argument or input field is marked @secret in the SDL. */
export function isSecret(def: Defined | null | undefined): boolean {
  const directives = def?.astNode?.directives;
  if (!directives) return false;
  for (const d of directives) if (d.name.value === SECRET_DIRECTIVE) return true;
  return false;
}

const holdsSecret = new WeakMap<GraphQLInputObjectType, boolean>();

/** True when a value of this input type can carry a secret: an input field marked @secret at any depth. */
export function inputHoldsSecret(type: GraphQLInputType): boolean {
  const named = getNamedType(type);
  if (!isInputObjectType(named)) return false;
  const known = holdsSecret.get(named);
  if (known !== undefined) return known;
  settle(named);
  return holdsSecret.get(named) === true;
}

/**
 * Answers inputHoldsSecret for every input type reachable from `root` at once: input types may refer to
 * each other in cycles, so a type holds a secret when one of its fields is secret or of a type that holds
 * one, worked out to a fixed point over the whole reachable set.
 */
function settle(root: GraphQLInputObjectType): void {
  const reachable: GraphQLInputObjectType[] = [root];
  const seen = new Set<GraphQLInputObjectType>(reachable);
  for (let i = 0; i < reachable.length; i++) {
    for (const field of Object.values((reachable[i] as GraphQLInputObjectType).getFields())) {
      const named = getNamedType(field.type);
      if (isInputObjectType(named) && !seen.has(named)) {
        seen.add(named);
        reachable.push(named);
      }
    }
  }
  const holds = new Set(reachable.filter((t) => Object.values(t.getFields()).some((f) => isSecret(f))));
  for (let changed = true; changed;) {
    changed = false;
    for (const t of reachable) {
      if (holds.has(t)) continue;
      if (Object.values(t.getFields()).some((f) => holds.has(getNamedType(f.type) as GraphQLInputObjectType))) {
        holds.add(t);
        changed = true;
      }
    }
  }
  for (const t of reachable) holdsSecret.set(t, holds.has(t));
}

/** Where a schema element sits: `Type.field` (output or input field) or `Type.field(arg:)`. */
export interface SchemaCoordinate {
  coordinate: string;
  /** The field's, argument's or input field's own name. */
  name: string;
  secret: boolean;
}

/** Every output field, argument and input field of the schema's own types, with its @secret mark. */
export function schemaCoordinates(schema: GraphQLSchema): SchemaCoordinate[] {
  const out: SchemaCoordinate[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        out.push({ coordinate: `${type.name}.${field.name}`, name: field.name, secret: isSecret(field) });
        for (const arg of field.args) {
          out.push({ coordinate: `${type.name}.${field.name}(${arg.name}:)`, name: arg.name, secret: isSecret(arg) });
        }
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields())) {
        out.push({ coordinate: `${type.name}.${field.name}`, name: field.name, secret: isSecret(field) });
      }
    }
  }
  return out;
}
