// Bounds on a GraphQL document, checked before validation in time linear in the document: tokens and
// bracket nesting while lexing, then fragments, aliases, depth and cost with each fragment measured once.
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

interface Measure {
  depth: number;
  cost: number;
}

export interface DocumentCheck {
  errors: GraphQLError[];
  /** Fragment bodies measured: each reachable fragment exactly once, whatever the number of its spreads. */
  fragmentVisits: number;
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

/** Depth and cost of a selection set, fragments taken from the memo (each spread costs a lookup). */
function measure(set: SelectionSetNode, memo: Map<string, Measure>): Measure {
  let depth = 0;
  let cost = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      // Each selected field costs 1, as in async-graphql (the system whose clients we serve, with the same
      // default maximum of 1000). Page sizes are bounded separately (SVC_LIST_MAX_LIMIT).
      const inner = sel.selectionSet ? measure(sel.selectionSet, memo) : { depth: 0, cost: 0 };
      depth = Math.max(depth, 1 + inner.depth);
      cost += 1 + inner.cost;
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      const inner = measure(sel.selectionSet, memo);
      depth = Math.max(depth, inner.depth);
      cost += inner.cost;
    } else {
      const inner = memo.get(sel.name.value);
      if (!inner) continue;
      depth = Math.max(depth, inner.depth);
      cost += inner.cost;
    }
  }
  return { depth, cost };
}

const shown = (n: number) => (Number.isSafeInteger(n) ? `${n} ` : '');

/**
 * Fragments, aliases, depth and complexity of every operation, before any validation rule expands a
 * fragment: a spread doubling its predecessor thirty times costs thirty measurements here, not 2^30.
 */
export function checkDocument(document: DocumentNode, limits: Omit<DocumentLimits, 'maxTokens' | 'maxNesting'>): DocumentCheck {
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
  if (fragmentCount > limits.maxFragments) {
    return { errors: [new GraphQLError(`query defines ${fragmentCount} fragments; the maximum is ${limits.maxFragments}`)], fragmentVisits: 0 };
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
    return { errors: [new GraphQLError(`query uses ${counts.aliases} aliases; the maximum is ${limits.maxAliases}`)], fragmentVisits: 0 };
  }
  const ordered = orderFragments(roots, spreadsOf);
  if ('cycle' in ordered) {
    const nodes = ordered.cycle.slice(0, -1).map((n) => fragments.get(n) as FragmentDefinitionNode);
    return { errors: [new GraphQLError(`fragment cycle: ${ordered.cycle.join(' -> ')}`, { nodes })], fragmentVisits: 0 };
  }
  const memo = new Map<string, Measure>();
  for (const name of ordered.order) memo.set(name, measure((fragments.get(name) as FragmentDefinitionNode).selectionSet, memo));
  const errors: GraphQLError[] = [];
  for (const op of operations) {
    const m = measure(op.selectionSet, memo);
    if (m.depth > limits.maxDepth) errors.push(new GraphQLError(`query depth ${shown(m.depth)}exceeds the maximum of ${limits.maxDepth}`, { nodes: [op] }));
    if (m.cost > limits.maxComplexity) errors.push(new GraphQLError(`query complexity ${shown(m.cost)}exceeds the maximum of ${limits.maxComplexity}`, { nodes: [op] }));
  }
  return { errors, fragmentVisits: memo.size };
}

/** The deepest nesting of a JSON value (objects and arrays), counted with an explicit stack up to `max` + 1. */
export function jsonNesting(value: unknown, max: number): number {
  let deepest = 0;
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [v, depth] = pending.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    const level = depth + 1;
    if (level > deepest) {
      deepest = level;
      if (deepest > max) return deepest;
    }
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) pending.push([child, level]);
    }
  }
  return deepest;
}
