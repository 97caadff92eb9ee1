// Assembles one executable schema from per-domain SDL files and resolver maps.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  GraphQLObjectType,
  GraphQLScalarType,
  Kind,
  buildASTSchema,
  parse,
  type DefinitionNode,
  type DocumentNode,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  type ObjectTypeDefinitionNode,
} from 'graphql';
import { sourceDir } from '../paths.js';

export interface ScalarImpl {
  serialize(value: unknown): unknown;
  parseValue(value: unknown): unknown;
  parseLiteral(ast: import('graphql').ValueNode, variables?: Record<string, unknown> | null): unknown;
}

// Resolver context is the per-request GraphQL context; the field maps stay loosely typed at this seam.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type FieldResolvers = Record<string, GraphQLFieldResolver<any, any, any>>;
export type Resolvers = Record<string, FieldResolvers | ScalarImpl>;

export interface GraphqlModule {
  name: string;
  sdl: string;
  resolvers: Resolvers;
}

/** Reads `src/<domain>/schema.graphql`; SDL stays in the source tree (the image ships it). */
export function readSdl(domain: string): string {
  return readFileSync(path.join(sourceDir, domain, 'schema.graphql'), 'utf8');
}

/**
 * Domains write `extend type Query/Mutation`; the first extension of a type nobody defines becomes its
 * definition, so no domain has to own the root types.
 */
function mergeRootExtensions(docs: DocumentNode[]): DocumentNode {
  const defined = new Set<string>();
  for (const doc of docs) {
    for (const def of doc.definitions) {
      if (def.kind === Kind.OBJECT_TYPE_DEFINITION) defined.add(def.name.value);
    }
  }
  const definitions: DefinitionNode[] = [];
  for (const doc of docs) {
    for (const def of doc.definitions) {
      if (def.kind === Kind.OBJECT_TYPE_EXTENSION && !defined.has(def.name.value)) {
        defined.add(def.name.value);
        definitions.push({ ...def, kind: Kind.OBJECT_TYPE_DEFINITION } as ObjectTypeDefinitionNode);
      } else {
        definitions.push(def);
      }
    }
  }
  return { kind: Kind.DOCUMENT, definitions };
}

export function buildSchema(modules: GraphqlModule[]): GraphQLSchema {
  const docs = modules.map((m) => {
    try {
      return parse(m.sdl);
    } catch (err) {
      throw new Error(`schema of ${m.name} does not parse: ${(err as Error).message}`);
    }
  });
  const schema = buildASTSchema(mergeRootExtensions(docs));
  for (const m of modules) attachResolvers(schema, m.name, m.resolvers);
  return schema;
}

function attachResolvers(schema: GraphQLSchema, owner: string, resolvers: Resolvers): void {
  for (const [typeName, impl] of Object.entries(resolvers)) {
    const type = schema.getType(typeName);
    if (type instanceof GraphQLScalarType) {
      const scalar = impl as ScalarImpl;
      type.serialize = scalar.serialize;
      type.parseValue = scalar.parseValue;
      type.parseLiteral = scalar.parseLiteral;
      continue;
    }
    if (!(type instanceof GraphQLObjectType)) {
      throw new Error(`${owner} has resolvers for ${typeName}, which is not an object type of the schema`);
    }
    const fields = type.getFields();
    for (const [fieldName, resolve] of Object.entries(impl as FieldResolvers)) {
      const field = fields[fieldName];
      if (!field) throw new Error(`${owner} resolves ${typeName}.${fieldName}, which the schema does not declare`);
      field.resolve = resolve;
    }
  }
}
