// Validation rules bounding query depth and cost, run once per distinct query text before compiling.
import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
} from 'graphql';

type Measure = (set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, seen: Set<string>) => number;

function fragmentsOf(context: ValidationContext): Map<string, FragmentDefinitionNode> {
  const map = new Map<string, FragmentDefinitionNode>();
  for (const def of context.getDocument().definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) map.set(def.name.value, def);
  }
  return map;
}

const depthOf: Measure = (set, fragments, seen) => {
  let max = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      max = Math.max(max, sel.selectionSet ? 1 + depthOf(sel.selectionSet, fragments, seen) : 1);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      max = Math.max(max, depthOf(sel.selectionSet, fragments, seen));
    } else {
      const name = sel.name.value;
      const frag = fragments.get(name);
      // Cycles are reported by the standard NoFragmentCycles rule; just stop here.
      if (!frag || seen.has(name)) continue;
      max = Math.max(max, depthOf(frag.selectionSet, fragments, new Set([...seen, name])));
    }
  }
  return max;
};

/**
 * Each selected field costs 1, as in async-graphql (the system whose clients we serve, with the same
 * default maximum of 1000): a wide query is bounded here, a deep one by the depth rule. Page sizes are
 * bounded separately (SVC_LIST_MAX_LIMIT), so a list's cost does not depend on its limit argument.
 */
const costOf: Measure = (set, fragments, seen) => {
  let total = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      total += 1 + (sel.selectionSet ? costOf(sel.selectionSet, fragments, seen) : 0);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      total += costOf(sel.selectionSet, fragments, seen);
    } else {
      const name = sel.name.value;
      const frag = fragments.get(name);
      if (!frag || seen.has(name)) continue;
      total += costOf(frag.selectionSet, fragments, new Set([...seen, name]));
    }
  }
  return total;
};

function operationRule(measure: Measure, limit: number, describe: (value: number, op: OperationDefinitionNode) => string) {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(op) {
      const value = measure(op.selectionSet, fragmentsOf(context), new Set());
      if (value > limit) context.reportError(new GraphQLError(describe(value, op), { nodes: [op] }));
    },
  });
}

export function depthLimitRule(maxDepth: number) {
  return operationRule(depthOf, maxDepth, (d) => `query depth ${d} exceeds the maximum of ${maxDepth}`);
}

export function complexityLimitRule(maxComplexity: number) {
  return operationRule(costOf, maxComplexity, (c) => `query complexity ${c} exceeds the maximum of ${maxComplexity}`);
}
