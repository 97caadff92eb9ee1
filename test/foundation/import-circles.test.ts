// No two files under src/ import each other, directly or through others (type-only imports included:
// a circle of types is a circle of ideas, and the next value import across it fails at load time).
// The graph is read with TypeScript's own import scanner; circles are its strongly connected components.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { projectRoot } from '../../src/paths.js';

const SRC = path.join(projectRoot, 'src');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Files each file imports or re-exports from (relative specifiers that resolve to a file under src/). */
export function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets: string[] = [];
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      let target = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts');
      if (!known.has(target) && known.has(path.join(target, 'index.ts'))) target = path.join(target, 'index.ts');
      if (known.has(target)) targets.push(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Tarjan's strongly connected components with more than one file (or a file importing itself). */
export function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

t.test('the check finds a circle when there is one', async (t) => {
  const graph = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']], ['e', ['e']]]);
  t.same(circles(graph), [['a', 'b', 'c'], ['e']]);
  t.same(circles(new Map([['a', ['b']], ['b', []]])), []);
});

t.test('no import circles under src/', async (t) => {
  const files = sourceFiles(SRC);
  t.ok(files.length > 100, `${files.length} files read`);
  const found = circles(importGraph(files)).map((c) => c.map((f) => path.relative(SRC, f)).join(' → '));
  t.same(found, [], found.length ? `circles:\n${found.join('\n')}` : 'none');
});
