// Validation rules bounding query depth and cost, run once per distinct query text before compiling.
import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValueNode,
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

/** A literal limit counts as written; a variable one as the largest page a list may return. */
function limitOf(value: ValueNode | undefined, variableLimit: number): number {
  if (!value) return 1;
  if (value.kind === Kind.INT) return Number(value.value);
  if (value.kind === Kind.VARIABLE) return variableLimit;
  return 1;
}

/**
 * Each field costs 1; a field taking `limit` multiplies the cost of what it returns by that limit.
 * Computed without the request's variables so the verdict can be cached with the compiled query.
 */
function costOf(variableLimit: number): Measure {
  const cost: Measure = (set, fragments, seen) => {
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        const limitArg = sel.arguments?.find((a) => a.name.value === 'limit');
        const multiplier = Math.max(1, limitOf(limitArg?.value, variableLimit));
        total += 1 + (sel.selectionSet ? multiplier * cost(sel.selectionSet, fragments, seen) : 0);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        total += cost(sel.selectionSet, fragments, seen);
      } else {
        const name = sel.name.value;
        const frag = fragments.get(name);
        if (!frag || seen.has(name)) continue;
        total += cost(frag.selectionSet, fragments, new Set([...seen, name]));
      }
    }
    return total;
  };
  return cost;
}

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

export function complexityLimitRule(maxComplexity: number, variableLimit: number) {
  return operationRule(costOf(variableLimit), maxComplexity, (c) => `query complexity ${c} exceeds the maximum of ${maxComplexity}`);
}
