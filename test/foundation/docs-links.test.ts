// Relative links of the README, docs/ and bench/ pages lead somewhere: the file exists and, for a
// `#anchor`, a heading of that file has that GitHub slug.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { projectRoot } from '../../src/paths.js';

// Pages other branches write (gRPC, certificate authority, custom endpoints, metrics): linked before
// they exist; once present they are checked like any other.
const PENDING = new Set(['docs/grpc.md', 'docs/pki.md', 'docs/custom-endpoints.md', 'docs/metrics.md']);

const pages = ['README.md', 'bench/README.md', 'bench/results/HISTORY.md',
  ...readdirSync(path.join(projectRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const counts = new Map<string, number>();
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const [, heading] of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = (heading as string).toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = counts.get(slug) ?? 0;
    counts.set(slug, n + 1);
    found.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return found;
}

for (const page of pages) {
  t.test(`links of ${page}`, async (t) => {
    const text = readFileSync(path.join(projectRoot, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target as string)) continue; // https:, mailto:
      const [file, anchor] = (target as string).split('#') as [string, string | undefined];
      const resolved = file ? path.normalize(path.join(path.dirname(page), file)) : page;
      if (!existsSync(path.join(projectRoot, resolved))) {
        if (!PENDING.has(resolved)) broken.push(`${target}: no file ${resolved}`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(path.join(projectRoot, resolved), 'utf8')).has(anchor)) {
        broken.push(`${target}: no heading #${anchor} in ${resolved}`);
      }
    }
    t.same(broken, [], 'every relative link resolves');
  });
}
