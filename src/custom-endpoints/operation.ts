// The stored GraphQL operation of an endpoint: one complete operation of the declared kind, never
// introspection (by field name, so neither an alias nor a fragment hides it).
import { Kind, parse, visit, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { invalidInput } from '../errors.js';

export const OPERATION_KINDS = ['query', 'mutation'] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

const INTROSPECTION_FIELDS = new Set(['__schema', '__type']);
export const INTROSPECTION_REFUSED = 'graphql must not use introspection (__schema, __type, IntrospectionQuery)';

export interface AnalysedOperation {
  kind: OperationKind;
  /** The operation's name, if it has one. */
  name: string | null;
  introspection: boolean;
}

/**
 * True when the document asks for introspection anywhere: a __schema or __type field in any selection
 * (an alias renames only the response key, the field name stays), in the operation or in any fragment
 * definition or inline fragment, or an operation or fragment named IntrospectionQuery.
 */
export function usesIntrospection(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Field(node) {
      if (INTROSPECTION_FIELDS.has(node.name.value)) found = true;
    },
    OperationDefinition(node) {
      if (node.name?.value.toLowerCase() === 'introspectionquery') found = true;
    },
    FragmentDefinition(node) {
      if (node.name.value.toLowerCase() === 'introspectionquery') found = true;
    },
  });
  return found;
}

/** Parses and checks the operation text against the rules that need no schema; names `graphql` in every refusal. */
export function analyseOperation(text: unknown, declaredKind: OperationKind): AnalysedOperation {
  if (typeof text !== 'string' || text.trim() === '') throw invalidInput('graphql must be a non-empty operation text');
  let document: DocumentNode;
  try {
    document = parse(text, { noLocation: true });
  } catch (err) {
    throw invalidInput(`graphql does not parse: ${(err as Error).message}`);
  }
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operations.length === 0) throw invalidInput('graphql must contain an operation, not only fragments');
  if (operations.length > 1) throw invalidInput(`graphql must contain exactly one operation; found ${operations.length}`);
  if (document.definitions.some((d) => d.kind !== Kind.OPERATION_DEFINITION && d.kind !== Kind.FRAGMENT_DEFINITION)) {
    throw invalidInput('graphql must hold an executable operation, not type definitions');
  }
  const operation = operations[0] as OperationDefinitionNode;
  if (usesIntrospection(document)) throw invalidInput(INTROSPECTION_REFUSED);
  const kind = operation.operation;
  if (kind !== 'query' && kind !== 'mutation') throw invalidInput(`graphql must be a query or a mutation; found a ${kind}`);
  if (kind !== declaredKind) throw invalidInput(`operationKind is ${declaredKind} but graphql holds a ${kind}`);
  // Complete: every fragment it spreads is defined in the text.
  const defined = new Set(document.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => d.name.value));
  const missing = new Set<string>();
  visit(document, {
    FragmentSpread(node) {
      if (!defined.has(node.name.value)) missing.add(node.name.value);
    },
  });
  if (missing.size > 0) throw invalidInput(`graphql is incomplete: fragment ${[...missing].join(', ')} is not defined`);
  return { kind, name: operation.name?.value ?? null, introspection: false };
}
