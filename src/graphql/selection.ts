// Which fields of a list's items a query asks for, so a list statement reads only what the answer needs
// (a per-row subquery such as an entity's object groups costs more than the rest of the row).
import type { FieldNode, FragmentDefinitionNode, GraphQLResolveInfo, SelectionSetNode } from 'graphql';

/** null: every field (the selection could not be read statically). */
export type ItemFields = ReadonlySet<string> | null;

// The field nodes of a compiled query are the same objects on every execution (graphql-jit builds the
// resolve info from constants), so the walk runs once per distinct query text.
const memo = new WeakMap<readonly FieldNode[], ItemFields>();

/**
 * The field names selected under `items` of the list field this resolver answers, through fragments.
 * A directive (@include/@skip) anywhere on the way makes the answer depend on variables: then null.
 */
export function itemFields(info: Pick<GraphQLResolveInfo, 'fieldNodes' | 'fragments'> | undefined): ItemFields {
  if (!info) return null;
  let fields = memo.get(info.fieldNodes);
  if (fields === undefined) {
    fields = collectItemFields(info.fieldNodes, info.fragments);
    memo.set(info.fieldNodes, fields);
  }
  return fields;
}

function collectItemFields(nodes: readonly FieldNode[], fragments: Record<string, FragmentDefinitionNode>): ItemFields {
  const names = new Set<string>();
  const items: SelectionSetNode[] = [];
  for (const node of nodes) {
    if (node.selectionSet && !walk(node.selectionSet, fragments, (f) => {
      if (f.name.value === 'items' && f.selectionSet) items.push(f.selectionSet);
    })) return null;
  }
  for (const set of items) if (!walk(set, fragments, (f) => names.add(f.name.value))) return null;
  return names;
}

/** Visits the fields of a selection set through fragments; false when a directive makes it dynamic. */
function walk(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>, visit: (f: FieldNode) => void, depth = 0): boolean {
  if (depth > 32) return false;
  for (const s of set.selections) {
    if (s.directives?.length) return false;
    if (s.kind === 'Field') visit(s);
    else if (s.kind === 'InlineFragment') {
      if (!walk(s.selectionSet, fragments, visit, depth + 1)) return false;
    } else {
      const fragment = fragments[s.name.value];
      if (!fragment || fragment.directives?.length || !walk(fragment.selectionSet, fragments, visit, depth + 1)) return false;
    }
  }
  return true;
}

/** Whether any of these item fields is asked for (every field when the selection is unknown). */
export function wantsAny(fields: ItemFields, ...names: string[]): boolean {
  return fields === null || names.some((n) => fields.has(n));
}
