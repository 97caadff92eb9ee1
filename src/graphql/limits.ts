// Bounds on a GraphQL document, checked before validation in time linear in the document: tokens and
// bracket nesting while lexing, then fragments, aliases, depth and cost with each fragment measured once
// (cost.ts: page sizes count when the schema is known).
import {
  GraphQLError,
  Kind,
  Lexer,
  Source,
  TokenKind,
  type DefinitionNode,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { costOf, measure, rootType, withDefaults, type CostTyping, type Measure } from './cost.js';

export interface DocumentLimits {
  /** Lexical tokens in the query text (graphql's parse maxTokens). */
  maxTokens: number;
  /** Brackets ({ [ () open at once: bounds the parser's recursion and that of every later pass. */
  maxNesting: number;
  maxFragments: number;
  maxAliases: number;
  maxDepth: number;
  maxComplexity: number;
}

const OPENING: ReadonlySet<string> = new Set([TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L]);
const CLOSING: ReadonlySet<string> = new Set([TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R]);

/**
 * Lexes the text once, without building anything: more tokens or deeper nesting than allowed is refused
 * before the recursive-descent parser sees it (a few thousand nested braces overflow its stack). Syntax
 * errors found while lexing are returned as they are.
 */
export function scanQueryText(query: string, limits: Pick<DocumentLimits, 'maxTokens' | 'maxNesting'>): GraphQLError | null {
  const lexer = new Lexer(new Source(query));
  let tokens = 0;
  let nesting = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++tokens > limits.maxTokens) return new GraphQLError(`query has more than ${limits.maxTokens} tokens`);
      if (OPENING.has(token.kind)) {
        if (++nesting > limits.maxNesting) {
          return new GraphQLError(`query nests brackets deeper than ${limits.maxNesting} levels`, { source: lexer.source, positions: [token.start] });
        }
      } else if (CLOSING.has(token.kind)) {
        nesting--;
      }
    }
  } catch (err) {
    if (err instanceof GraphQLError) return err;
    throw err;
  }
  return null;
}

export interface DocumentCheck {
  errors: GraphQLError[];
  /** Fragment bodies measured: each reachable fragment exactly once, whatever the number of its spreads. */
  fragmentVisits: number;
  /** An operation's cost exceeds the maximum only at the largest page sizes its variables could ask for. */
  costDependsOnVariables: boolean;
}

/** Fragment spreads and aliases of one definition (the walk is as deep as the nesting bound allows). */
function survey(set: SelectionSetNode, spreads: string[], counts: { aliases: number }): void {
  for (const sel of set.selections) {
    if (sel.kind === Kind.FRAGMENT_SPREAD) spreads.push(sel.name.value);
    else {
      if (sel.kind === Kind.FIELD && sel.alias) counts.aliases++;
      if (sel.selectionSet) survey(sel.selectionSet, spreads, counts);
    }
  }
}

/**
 * The fragments reachable from the operations, each after every fragment it spreads (an explicit stack,
 * so a chain of thousands costs no recursion), or the cycle found. Unknown names are left to validation.
 */
function orderFragments(roots: string[], spreadsOf: Map<string, string[]>): { order: string[] } | { cycle: string[] } {
  const state = new Map<string, 'open' | 'done'>();
  const order: string[] = [];
  for (const root of roots) {
    if (state.has(root) || !spreadsOf.has(root)) continue;
    const path: { name: string; next: number }[] = [{ name: root, next: 0 }];
    state.set(root, 'open');
    while (path.length > 0) {
      const top = path[path.length - 1] as { name: string; next: number };
      const children = spreadsOf.get(top.name) as string[];
      if (top.next < children.length) {
        const child = children[top.next++] as string;
        if (!spreadsOf.has(child)) continue;
        const seen = state.get(child);
        if (seen === 'open') {
          const from = path.findIndex((p) => p.name === child);
          return { cycle: [...path.slice(from).map((p) => p.name), child] };
        }
        if (seen === undefined) {
          state.set(child, 'open');
          path.push({ name: child, next: 0 });
        }
      } else {
        state.set(top.name, 'done');
        order.push(top.name);
        path.pop();
      }
    }
  }
  return { order };
}

const shown = (n: number) => (Number.isSafeInteger(n) ? `${n} ` : '');

/**
 * Fragments, aliases, depth and complexity of every operation, before any validation rule expands a
 * fragment: a spread doubling its predecessor thirty times costs thirty measurements here, not 2^30.
 * With typing, page sizes count (limit × selection); without a request's variables, a variable limit
 * counts at the maximum page size, and an operation over the cost only that way is left to the request
 * (costDependsOnVariables) rather than refused.
 */
export function checkDocument(document: DocumentNode, limits: Omit<DocumentLimits, 'maxTokens' | 'maxNesting'>, typing?: CostTyping): DocumentCheck {
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations: OperationDefinitionNode[] = [];
  let fragmentCount = 0;
  for (const def of document.definitions as readonly DefinitionNode[]) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) {
      fragmentCount++;
      if (!fragments.has(def.name.value)) fragments.set(def.name.value, def);
    } else if (def.kind === Kind.OPERATION_DEFINITION) {
      operations.push(def);
    }
  }
  const refused = (error: GraphQLError): DocumentCheck => ({ errors: [error], fragmentVisits: 0, costDependsOnVariables: false });
  if (fragmentCount > limits.maxFragments) {
    return refused(new GraphQLError(`query defines ${fragmentCount} fragments; the maximum is ${limits.maxFragments}`));
  }
  const counts = { aliases: 0 };
  const spreadsOf = new Map<string, string[]>();
  for (const [name, fragment] of fragments) {
    const spreads: string[] = [];
    survey(fragment.selectionSet, spreads, counts);
    spreadsOf.set(name, spreads);
  }
  const roots: string[] = [];
  for (const op of operations) survey(op.selectionSet, roots, counts);
  if (counts.aliases > limits.maxAliases) {
    return refused(new GraphQLError(`query uses ${counts.aliases} aliases; the maximum is ${limits.maxAliases}`));
  }
  const ordered = orderFragments(roots, spreadsOf);
  if ('cycle' in ordered) {
    const nodes = ordered.cycle.slice(0, -1).map((n) => fragments.get(n) as FragmentDefinitionNode);
    return refused(new GraphQLError(`fragment cycle: ${ordered.cycle.join(' -> ')}`, { nodes }));
  }
  const memo = measureFragments(fragments, ordered.order, typing);
  const errors: GraphQLError[] = [];
  let costDependsOnVariables = false;
  for (const op of operations) {
    const m = measure(op.selectionSet, rootType(op, typing), memo, typing);
    if (m.depth > limits.maxDepth) errors.push(new GraphQLError(`query depth ${shown(m.depth)}exceeds the maximum of ${limits.maxDepth}`, { nodes: [op] }));
    if (costOf(m) <= limits.maxComplexity) continue;
    if (m.variable && typing && !typing.variables) costDependsOnVariables = true;
    else errors.push(complexityError(costOf(m), limits.maxComplexity, op));
  }
  return { errors, fragmentVisits: memo.size, costDependsOnVariables };
}

function complexityError(cost: number, max: number, op: OperationDefinitionNode): GraphQLError {
  return new GraphQLError(`query complexity ${shown(cost)}exceeds the maximum of ${max}`, { nodes: [op] });
}

/** Each reachable fragment measured once, after every fragment it spreads, against its type condition. */
function measureFragments(fragments: Map<string, FragmentDefinitionNode>, order: string[], typing: CostTyping | undefined): Map<string, Measure> {
  const memo = new Map<string, Measure>();
  for (const name of order) {
    const fragment = fragments.get(name) as FragmentDefinitionNode;
    const type = typing ? typing.schema.getType(fragment.typeCondition.name.value) ?? undefined : undefined;
    memo.set(name, measure(fragment.selectionSet, type, memo, typing));
  }
  return memo;
}

/**
 * The cost of the operation a request runs, with its variables: for documents whose cost depends on
 * them (checkDocument found them within every other bound, so fragments are known acyclic).
 */
export function checkOperationCost(document: DocumentNode, op: OperationDefinitionNode, maxComplexity: number, typing: CostTyping): GraphQLError | null {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION && !fragments.has(def.name.value)) fragments.set(def.name.value, def);
  }
  const roots: string[] = [];
  survey(op.selectionSet, roots, { aliases: 0 });
  const spreadsOf = new Map<string, string[]>();
  for (const [name, fragment] of fragments) {
    const spreads: string[] = [];
    survey(fragment.selectionSet, spreads, { aliases: 0 });
    spreadsOf.set(name, spreads);
  }
  const ordered = orderFragments(roots, spreadsOf);
  if ('cycle' in ordered) return null;
  const withVariables = { ...typing, variables: withDefaults(op, typing.variables) };
  const cost = costOf(measure(op.selectionSet, rootType(op, withVariables), measureFragments(fragments, ordered.order, withVariables), withVariables));
  return cost > maxComplexity ? complexityError(cost, maxComplexity, op) : null;
}

export { jsonNesting } from '../json-size.js';
