// The GraphQL rows of the matrix, generated from the live schema (introspection): every Query and Mutation
// field, its arguments declared with their schema types and filled from the fixture table, its answer
// selected down to two levels of scalars, asked by every caller in every own/foreign combination. A query
// answering null, or a mutation answering false (nothing done), is a refusal: the snapshot shows whether
// anything changed all the same.
import {
  buildClientSchema, getIntrospectionQuery, getNamedType, isInputObjectType, isLeafType, isNonNullType, isObjectType,
  type GraphQLField, type GraphQLInputType, type GraphQLObjectType, type GraphQLSchema, type IntrospectionQuery,
} from 'graphql';
import { gql, type TestService } from '../../helpers/service.js';
import { GRAPHQL, NO_IDS } from './graphql-fixtures.js';
import { comparable, hiddenCounts, leaksIn, oracle, variantsOf } from './judge.js';
import type { World } from './world.js';

export interface Operation {
  root: 'query' | 'mutation';
  field: GraphQLField<unknown, unknown>;
}

export async function liveSchema(ts: TestService, token: string): Promise<GraphQLSchema> {
  const res = await gql(ts.url(), getIntrospectionQuery(), {}, token);
  if (res.body.errors) throw new Error(`introspection failed: ${JSON.stringify(res.body.errors)}`);
  return buildClientSchema(res.body.data as unknown as IntrospectionQuery);
}

export function operationsOf(schema: GraphQLSchema): Operation[] {
  const out: Operation[] = [];
  for (const [root, type] of [['query', schema.getQueryType()], ['mutation', schema.getMutationType()]] as const) {
    for (const field of Object.values(type?.getFields() ?? {})) out.push({ root, field });
  }
  return out;
}

/** Does an argument (or any field of an input object, at any depth) carry an ID? */
function carriesId(type: GraphQLInputType, seen = new Set<string>()): boolean {
  const named = getNamedType(type);
  if (named.name === 'ID') return true;
  if (!isInputObjectType(named) || seen.has(named.name)) return false;
  seen.add(named.name);
  return Object.values(named.getFields()).some((f) => carriesId(f.type, seen));
}

export function takesId(op: Operation): boolean {
  return op.field.args.some((a) => carriesId(a.type));
}

/** Fixture coverage against the schema: missing rows, rows for operations that are gone, misfiled ones. */
export function coverage(ops: Operation[]) {
  const names = new Set(ops.map((o) => o.field.name));
  return {
    missing: [...new Set(ops.filter((o) => takesId(o) && !GRAPHQL[o.field.name]).map((o) => o.field.name))].sort(),
    unclassified: [...new Set(ops.filter((o) => !takesId(o) && !(o.field.name in NO_IDS)).map((o) => o.field.name))].sort(),
    stale: [...Object.keys(GRAPHQL), ...Object.keys(NO_IDS)].filter((n) => !names.has(n)).sort(),
    misfiled: Object.keys(NO_IDS).filter((n) => ops.some((o) => o.field.name === n && takesId(o))).sort(),
  };
}

function selectionOf(type: GraphQLObjectType, depth: number): string {
  const parts: string[] = [];
  for (const f of Object.values(type.getFields())) {
    if (f.args.some((a) => isNonNullType(a.type) && a.defaultValue === undefined)) continue;
    const named = getNamedType(f.type);
    if (isLeafType(named)) parts.push(f.name);
    else if (isObjectType(named) && depth > 0) {
      const inner = selectionOf(named, depth - 1);
      if (inner) parts.push(`${f.name} ${inner}`);
    }
  }
  return parts.length ? `{ ${parts.join(' ')} }` : '';
}

/** The operation's document: variables declared with the schema's own types for the arguments given. */
export function documentOf(op: Operation, given: Record<string, unknown>): string {
  const { field } = op;
  for (const a of field.args) {
    if (isNonNullType(a.type) && a.defaultValue === undefined && !(a.name in given)) throw new Error(`fixture for ${field.name} lacks required argument ${a.name}`);
  }
  for (const name of Object.keys(given)) if (!field.args.some((a) => a.name === name)) throw new Error(`fixture for ${field.name} names unknown argument ${name}`);
  const args = field.args.filter((a) => a.name in given);
  const vars = args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
  const call = args.map((a) => `${a.name}: $${a.name}`).join(', ');
  const named = getNamedType(field.type);
  const selection = isObjectType(named) ? selectionOf(named, 2) : '';
  return `${op.root}${vars ? ` (${vars})` : ''} { ${field.name}${call ? `(${call})` : ''} ${selection} }`;
}

const REFUSALS = new Set(['UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_REQUEST']);

/** Every caller, every argument set, every combination: the problems found (empty when all were refused cleanly). */
export async function probeOperation(ts: TestService, world: World, op: Operation): Promise<{ problems: string[]; calls: number }> {
  const row = GRAPHQL[op.field.name]!;
  const argSets = Array.isArray(row.args) ? row.args : [row.args];
  const calls: Promise<string[]>[] = [];
  let twins = 0;
  for (const caller of world.callers) {
    for (const args of argSets) {
      for (const variant of variantsOf(args, world, caller.name)) {
        const variables = variant.value as Record<string, unknown>;
        const doc = documentOf(op, variables);
        const allowedAnswer = row.answers?.[caller.name];
        const twin = variant.twin && !allowedAnswer
          ? gql(ts.url(), doc, variant.twin.value as Record<string, unknown>, caller.token) : undefined;
        if (twin) twins++;
        calls.push(gql(ts.url(), doc, variables, caller.token).then(async (res) => {
          const where = `${caller.name} ${variant.label}`;
          const other = twin ? await twin : undefined;
          const twinProblems = other
            ? [...oracle(where, comparable(res, variant.twin!.swapped), comparable(other, variant.twin!.swapped)),
              ...(other.body.errors ?? []).filter((e) => !REFUSALS.has(e.extensions?.code)).map((e) => `${where}, never-existing twin: error ${e.extensions?.code} '${e.message}'`)]
            : [];
          const problems: string[] = [];
          if (res.status !== 200) problems.push(`${where}: HTTP ${res.status}`);
          const errors = res.body.errors ?? [];
          const value = res.body.data?.[op.field.name];
          const answered = value !== null && value !== undefined;
          const leaks = leaksIn(JSON.stringify(res.body), JSON.stringify(variables), world);
          for (const e of errors) {
            const code = e.extensions?.code;
            if (!REFUSALS.has(code)) problems.push(`${where}: error ${code} '${e.message}'`);
          }
          const allowed = row.answers?.[caller.name];
          if (!answered) {
            if (errors.length === 0 && op.root === 'mutation' && !row.readOnly) problems.push(`${where}: neither an answer nor an error`);
            if (leaks.length) problems.push(`${where}: the refusal names ${leaks.join(', ')}`);
          } else if (allowed) {
            problems.push(...hiddenCounts(value).map((h) => `${where}: ${h}`));
          } else if (op.root === 'mutation' && !row.readOnly && value !== false) {
            problems.push(`${where}: the mutation was answered: ${JSON.stringify(value).slice(0, 200)}`);
          } else {
            if (leaks.length) problems.push(`${where}: returned ${leaks.join(', ')}`);
            problems.push(...hiddenCounts(value).map((h) => `${where}: ${h}`));
          }
          return [...problems, ...twinProblems];
        }));
      }
    }
  }
  const results = await Promise.all(calls);
  return { problems: results.flat(), calls: calls.length + twins };
}
