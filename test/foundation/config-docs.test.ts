// docs/configuration.md against src/config.ts: every setting read is documented once, every documented one
// is read, documented defaults are the applied ones, and the README and docs name only real settings.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { projectRoot } from '../../src/paths.js';
import { differsFromDefault, literalDefault, settingRows, settingsRead } from '../helpers/config-docs.js';

const PAGE = 'docs/configuration.md';
const read = settingsRead();
const { rows, malformed } = settingRows(PAGE);

t.test('the reader sees the settings config.ts reads', async (t) => {
  // Guards the instrumentation itself: names read unconditionally, behind a switch, and built at run time.
  for (const name of ['DATABASE_URL', 'SVC_HTTP_ADDR', 'SVC_MQTTS_ADDR', 'SVC_HTTP_RATE_LIMIT_GRAPHQL_WINDOW_SECS', 'SVC_URL']) {
    t.ok(read.has(name), `${name} is found`);
  }
  t.ok(read.size > 100, `${read.size} settings`);
});

t.test(`${PAGE} lists every setting once, in well-formed rows`, async (t) => {
  t.same(malformed, [], 'every row of a setting table names one setting');
  const seen = new Map<string, number>();
  for (const row of rows) {
    if (seen.has(row.name)) t.fail(`${row.name} is listed twice (lines ${seen.get(row.name)} and ${row.line})`);
    seen.set(row.name, row.line);
    if (!row.meaning) t.fail(`${row.name} (line ${row.line}) has no meaning`);
    if (!row.defaultCell) t.fail(`${row.name} (line ${row.line}) has no default`);
  }
  const undocumented = [...read].filter((n) => !seen.has(n)).sort();
  const notRead = [...seen.keys()].filter((n) => !read.has(n)).sort();
  t.same(undocumented, [], 'every setting src/config.ts reads is documented');
  t.same(notRead, [], 'every documented setting is read by src/config.ts');
});

t.test('documented defaults are the ones loadConfig applies', async (t) => {
  // Also the README's own tables: "Main settings" (setting | default) and "Listeners" (surface | default | setting).
  const readmeRows = settingRows('README.md');
  t.same(readmeRows.malformed, [], 'README setting tables are well-formed');
  let checked = 0;
  for (const row of [...rows, ...readmeRows.rows]) {
    if (!read.has(row.name)) {
      t.fail(`${row.file}:${row.line}: ${row.name} is not a setting`);
      continue;
    }
    const value = literalDefault(row.defaultCell) ?? literalDefault(row.defaultCell.replace(/\s*\(.*\)$/, ''));
    if (value === undefined) continue; // prose: "unset", "empty", "cores − 1, between 1 and 4"
    const problem = differsFromDefault(row.name, value);
    if (problem) t.fail(`${row.file}:${row.line}: documented default ${row.defaultCell}: ${problem}`);
    checked++;
  }
  t.ok(checked > 100, `${checked} literal defaults checked`);
});

t.test('the README listeners table gives each listener its default address', async (t) => {
  const text = readFileSync(path.join(projectRoot, 'README.md'), 'utf8');
  const rowsOfListeners = [...text.matchAll(/^\|[^|\n]+\|\s*([0-9.]+:\d+)\s*\|\s*`(SVC_[A-Z_]+)`\s*\|$/gm)];
  t.ok(rowsOfListeners.length >= 8, `${rowsOfListeners.length} listener rows`);
  for (const [, address, name] of rowsOfListeners) {
    t.equal(differsFromDefault(name as string, address as string), null, `${name} defaults to ${address}`);
  }
});

t.test('README.md and docs/ name only settings that exist', async (t) => {
  const files = ['README.md', ...readdirSync(path.join(projectRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  for (const file of files) {
    const text = readFileSync(path.join(projectRoot, file), 'utf8');
    // A name followed by `*`, `_*` or `{` is a family (`SVC_PKI_*`), not a setting.
    const unknown = [...text.matchAll(/\b(SVC_[A-Z0-9_]*[A-Z0-9])(?![A-Z0-9_]*[*{])/g)]
      .map((m) => m[1] as string).filter((n) => !read.has(n));
    t.same([...new Set(unknown)], [], `${file} mentions no unknown setting`);
  }
});
