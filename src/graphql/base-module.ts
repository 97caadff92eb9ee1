// The base GraphQL module: the JSON scalar every domain uses and the public health field.
import { Kind, type ValueNode } from 'graphql';
import { invalidInput } from '../errors.js';
import { readSdl, type GraphqlModule } from './schema.js';

function parseJsonLiteral(ast: ValueNode, variables?: Record<string, unknown> | null): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map((v) => parseJsonLiteral(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, parseJsonLiteral(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    default:
      throw invalidInput('JSON value expected');
  }
}

export function baseGraphqlModule(): GraphqlModule {
  return {
    name: 'base',
    sdl: readSdl('graphql'),
    resolvers: {
      JSON: {
        serialize: (v: unknown) => v,
        parseValue: (v: unknown) => v,
        parseLiteral: parseJsonLiteral,
      },
      Query: {
        health: () => 'ok',
      },
    },
  };
}
