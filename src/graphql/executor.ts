// Parse + validate + graphql-jit compile once per distinct query text; execute and format per the error contract.
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import {
  GraphQLError,
  getOperationAST,
  NoSchemaIntrospectionCustomRule,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type OperationDefinitionNode,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { LRUCache } from 'lru-cache';
import { answerTooLarge, graphqlExtensions, isUnexpected, toAppError } from '../errors.js';
import type { Logger } from '../log.js';
import type { GraphqlContext } from './context.js';
import { utf8Within } from '../json-size.js';
import type { CostTyping } from './cost.js';
import { checkDocument, checkOperationCost, jsonNesting, scanQueryText, type DocumentLimits } from './limits.js';
import { createOperationTally, type OperationCounts, type OperationTally } from './operation-tally.js';

export interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

export interface ExecutorOptions extends DocumentLimits {
  introspection: boolean;
  cacheSize: number;
  /** The largest page a list answers (SVC_LIST_MAX_LIMIT): a limit not known counts as this many items. */
  maxPageSize: number;
  /** What a JSON-typed field costs (SVC_GRAPHQL_JSON_FIELD_COST). */
  jsonFieldCost: number;
  /** The most bytes one answer may have (SVC_ANSWER_MAX_BYTES). */
  answerMaxBytes: number;
}

/** keep false: not worth a cache entry (refused while lexing, so cheap to refuse again, and maybe huge). */
type Prepared = {
  compiled: CompiledQuery;
  document: DocumentNode;
  counts: OperationCounts;
  /** Set when the operation's cost passes the maximum only at page sizes its variables may ask for: measured per request. */
  costByRequest: OperationDefinitionNode | null;
} | { errors: readonly GraphQLError[]; keep?: false };

/**
 * The cache is keyed by query text: besides its entry count, the texts it holds are bounded (in
 * characters), so a stream of distinct large documents cannot pile up in memory.
 */
const CACHED_TEXT_BUDGET = 8 * 1024 * 1024;

export interface GraphqlExecutor {
  /** Executes and returns the serialized JSON response body (synchronously when no resolver awaited). */
  execute(request: GraphqlRequest, context: GraphqlContext): string | Promise<string>;
  /** Validates without executing (custom endpoints check their stored operation at save time). */
  check(query: string, operationName?: string | null): readonly GraphQLError[];
  readonly stats: { compilations: number; cached: number };
  /** Executions by operation name and outcome, and requests refused before execution (metrics). */
  readonly operations: OperationTally;
  readonly schema: GraphQLSchema;
}

export function createGraphqlExecutor(schema: GraphQLSchema, options: ExecutorOptions, log: Logger): GraphqlExecutor {
  const cache = new LRUCache<string, Prepared>({
    max: options.cacheSize, maxSize: CACHED_TEXT_BUDGET, sizeCalculation: (_value, key) => key.length + 1,
  });
  const rules: ValidationRule[] = [...specifiedRules];
  if (!options.introspection) rules.push(NoSchemaIntrospectionCustomRule);
  let compilations = 0;
  const operations = createOperationTally();
  const typing: CostTyping = { schema, maxPageSize: options.maxPageSize, jsonFieldCost: options.jsonFieldCost };

  function prepare(query: string, operationName: string | null | undefined): Prepared {
    const key = operationName ? `${operationName}\u0000${query}` : query;
    let prepared = cache.get(key);
    if (prepared) return prepared;
    prepared = compile(query, operationName);
    if (!('keep' in prepared)) cache.set(key, prepared);
    return prepared;
  }

  function compile(query: string, operationName: string | null | undefined): Prepared {
    // Every bound is checked in time linear in the text before anything recursive or expanding runs:
    // the lexer pass (tokens, nesting), then fragments, aliases, depth and cost with each fragment once.
    const scanned = scanQueryText(query, options);
    if (scanned) return { errors: [scanned], keep: false };
    let document: DocumentNode;
    try {
      document = parse(query, { maxTokens: options.maxTokens });
    } catch (err) {
      return { errors: [err as GraphQLError] };
    }
    const bounded = checkDocument(document, options, typing);
    if (bounded.errors.length > 0) return { errors: bounded.errors };
    // graphql-jit's compileQuery does not validate: validation is ours, and it runs exactly once here.
    const errors = validate(schema, document, rules);
    if (errors.length > 0) return { errors };
    const compiled = compileQuery(schema, document, operationName ?? undefined, { customJSONSerializer: false });
    if (!isCompiledQuery(compiled)) return { errors: compiled.errors ?? [] };
    compilations++;
    const operation = getOperationAST(document, operationName ?? undefined);
    return {
      compiled, document, counts: operations.slot(operation?.name?.value, operation?.operation ?? 'query'),
      costByRequest: bounded.costDependsOnVariables ? operation ?? null : null,
    };
  }

  function formatError(err: GraphQLError, requestId: string) {
    const base: Record<string, unknown> = { message: err.message };
    if (err.locations) base.locations = err.locations;
    if (err.path) base.path = err.path;
    const original = err.originalError;
    if (original && !(original instanceof GraphQLError && !original.originalError)) {
      const appErr = toAppError(original);
      if (isUnexpected(appErr)) log.error('resolver failed', { requestId, path: err.path, err: original });
      base.message = appErr.message;
      base.extensions = graphqlExtensions(appErr, requestId);
      return base;
    }
    if (err.path) {
      // An error bound to a result path without a cause is a schema/resolver contract break: ours, not the client's.
      log.error('result violated the schema', { requestId, path: err.path, message: err.message });
      base.message = 'internal error';
      base.extensions = { code: 'INTERNAL', retryable: false, requestId };
      return base;
    }
    base.extensions = { code: 'BAD_REQUEST', retryable: false, requestId };
    return base;
  }

  /**
   * The answer's text, serialised one root field (alias) at a time and given up as soon as it passes
   * SVC_ANSWER_MAX_BYTES: the most ever built is the cap plus one field's text (a page, bounded by the
   * query's cost), never the whole of an answer far past it. The text is then measured in UTF-8 bytes.
   */
  function serialize(result: ExecutionResult, requestId: string): string {
    const max = options.answerMaxBytes;
    let length = 0;
    const parts: string[] = [];
    if (result.errors && result.errors.length > 0) {
      const errors = `"errors":${JSON.stringify(result.errors.map((e) => formatError(e as GraphQLError, requestId)))}`;
      length += errors.length;
      if (length > max) return tooLarge(requestId);
      parts.push(errors);
    }
    const data = result.data;
    if (data === null) parts.push('"data":null');
    else if (data !== undefined) {
      const fields: string[] = [];
      for (const key of Object.keys(data)) {
        const field = `${JSON.stringify(key)}:${JSON.stringify(data[key]) ?? 'null'}`;
        length += field.length + 1;
        if (length > max) return tooLarge(requestId);
        fields.push(field);
      }
      parts.push(`"data":{${fields.join(',')}}`);
    }
    const text = `{${parts.join(',')}}`;
    return utf8Within(text, max) ? text : tooLarge(requestId);
  }

  function tooLarge(requestId: string): string {
    const err = answerTooLarge(options.answerMaxBytes);
    log.info('answer refused for its size', { requestId, maxBytes: options.answerMaxBytes });
    return JSON.stringify({ errors: [{ message: err.message, extensions: graphqlExtensions(err, requestId) }] });
  }

  /** A variable nested deeper than a document may nest: resolvers, JSON.stringify and PostgreSQL recurse on it. */
  function tooDeep(variables: Record<string, unknown> | null | undefined): GraphQLError | null {
    if (!variables) return null;
    for (const [name, value] of Object.entries(variables)) {
      if (typeof value === 'object' && value !== null && jsonNesting(value, options.maxNesting) > options.maxNesting) {
        return new GraphQLError(`variable '${name}' nests deeper than ${options.maxNesting} levels`);
      }
    }
    return null;
  }

  const tallied = (counts: OperationCounts, result: ExecutionResult): ExecutionResult => {
    if (result.errors && result.errors.length > 0) counts.error++;
    else counts.ok++;
    return result;
  };

  const refuse = (errors: readonly GraphQLError[], requestId: string) => JSON.stringify({ errors: errors.map((e) => formatError(e, requestId)) });

  return {
    execute(request, context) {
      const prepared = prepare(request.query, request.operationName);
      if ('errors' in prepared) {
        operations.rejected++;
        return refuse(prepared.errors, context.requestId);
      }
      const deep = tooDeep(request.variables);
      if (deep) {
        operations.rejected++;
        return refuse([deep], context.requestId);
      }
      if (prepared.costByRequest) {
        const costly = checkOperationCost(prepared.document, prepared.costByRequest, options.maxComplexity, { ...typing, variables: request.variables ?? {} });
        if (costly) {
          operations.rejected++;
          return refuse([costly], context.requestId);
        }
      }
      const counts = prepared.counts;
      const result = prepared.compiled.query(undefined, context, request.variables ?? {});
      // graphql-jit answers synchronously when no resolver returned a promise: keep that path promise-free.
      if (result instanceof Promise) return result.then((r) => serialize(tallied(counts, r), context.requestId));
      return serialize(tallied(counts, result), context.requestId);
    },
    check(query, operationName) {
      const prepared = prepare(query, operationName);
      return 'errors' in prepared ? prepared.errors : [];
    },
    get stats() {
      return { compilations, cached: cache.size };
    },
    operations,
    schema,
  };
}
