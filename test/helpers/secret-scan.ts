// The whole-run secret scan (issue 35.5, SECURITY.md "What is logged"). When test/run.mjs sets
// SVC_TEST_SECRET_SCAN_DIR, every test process notes the secrets that cross its HTTP calls to the service
// (request and answer fields the schema marks @secret, and the REST forms of the same: passwords, shared
// keys, session JWTs, access tokens, invitation tokens, generated private keys), keeps its services' logs
// at debug level, and before each test database is dropped searches its whole content and those logs
// for every secret the process has seen so far. What it finds, and what it searched, is appended to files
// in that directory; test/run.mjs gives the verdict once the run is over. Without the variable nothing
// here runs and fetch is left alone.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';

const DIR = process.env.SVC_TEST_SECRET_SCAN_DIR;
export const scanning = Boolean(DIR);

/** The forms a secret may take once encoded on its way to a log or a column. */
export function forms(secret: string | Buffer): string[] {
  const bytes = Buffer.isBuffer(secret) ? secret : Buffer.from(secret);
  const out = [bytes.toString('base64').replace(/=+$/, ''), bytes.toString('base64url'), bytes.toString('hex')];
  if (!Buffer.isBuffer(secret)) out.push(secret, JSON.stringify(secret).slice(1, -1));
  // Long values also by their middle: a truncated field still leaks a key (its start is the encoding's
  // header, the same for every key of a type, so it is no evidence).
  return [...new Set(out.flatMap((f) => (f.length > 64 ? [f, f.slice(f.length / 2 - 16, f.length / 2 + 16)] : [f])))];
}

/** Every secret whose value (in any of its forms) appears in `haystack`, by name. */
export function leaks(secrets: Record<string, string | Buffer>, haystack: string): string[] {
  return Object.entries(secrets).filter(([, value]) => forms(value).some((f) => haystack.includes(f))).map(([name]) => name);
}

/** The DER inside a PEM: what a stored or logged key would be, whatever its armour. */
export const pemBody = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');

// ---- what the process has seen ----

interface Seen { value: string | Buffer; origin: string; forms: string[] }
const seen = new Map<string, Seen>();
/** Values the test also sent in fields that are not secret (a hostile string tried as a name and a password). */
const sentOpenly = new Set<string>();
const pending = new Set<Promise<void>>();
const file = (process.argv[1] ?? 'unknown').replace(/^.*\/dist\//, '');
/** Shorter ones are test fixtures like 'x' or 'wrong' whose matches would mean nothing. */
const MIN_LENGTH = 12;
/** The service refuses longer secrets (and the tests that send them are probing limits, not leaks). */
const MAX_LENGTH = 4096;
/** Deeper documents are hostile-input probes; their secrets, if any, are found at the top. */
const MAX_DEPTH = 16;

const candidate = (value: unknown): value is string => typeof value === 'string' && value.length >= MIN_LENGTH && value.length <= MAX_LENGTH;

function note(value: unknown, origin: string): void {
  if (!candidate(value) || seen.has(value)) return;
  const secret = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(value) ? pemBody(value) : value;
  seen.set(value, { value: secret, origin, forms: forms(secret) });
}

const REQUEST_FIELDS = new Set(['secret', 'password', 'currentPassword', 'newPassword']);
const ANSWER_FIELDS = new Set(['secret', 'token', 'privateKeyPem', 'password']);
/** A GraphQL document's literal arguments of the same names (`login(input: {secret: "..."})`). */
const INLINE = /\b(secret|password|currentPassword|newPassword)\s*:\s*"((?:[^"\\]|\\.)*)"/g;
/** The same arguments bound to variables (`createPassword(password: $pw)`): `pw` is then a secret too. */
const BOUND = /\b(secret|password|currentPassword|newPassword)\s*:\s*\$(\w+)/g;

function walk(value: unknown, fields: ReadonlySet<string>, origin: string, parent = '', depth = 0): void {
  if (depth > MAX_DEPTH) return;
  if (Array.isArray(value)) {
    for (const item of value) walk(item, fields, origin, parent, depth + 1);
    return;
  }
  if (value === null || typeof value !== 'object') {
    if (origin === 'sent' && candidate(value)) sentOpenly.add(value);
    return;
  }
  for (const [key, inner] of Object.entries(value)) {
    // A shared key's answer field is plain `key`, also the name of harmless things (route keys).
    if (fields.has(key) || (key === 'key' && /sharedkey/i.test(parent))) note(inner, `${origin} ${key}`);
    else walk(inner, fields, origin, key, depth + 1);
  }
}

function noteRequest(body: unknown): void {
  if (typeof body !== 'string' || body.length > 1_000_000) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return;
  }
  const query = (parsed as { query?: unknown } | null)?.query;
  const bound = typeof query === 'string' ? [...query.matchAll(BOUND)].map((m) => m[2]!) : [];
  walk(parsed, bound.length ? new Set([...REQUEST_FIELDS, ...bound]) : REQUEST_FIELDS, 'sent');
  if (typeof query === 'string') {
    for (const m of query.matchAll(INLINE)) {
      try {
        note(JSON.parse(`"${m[2]}"`), `sent inline ${m[1]}`);
      } catch {
        // Not a string literal JSON can read: a hostile document, not a secret.
      }
    }
  }
}

if (scanning) {
  const original = globalThis.fetch;
  // Noting never changes what the test sees: whatever it cannot read is passed over.
  globalThis.fetch = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    try {
      noteRequest(init?.body);
    } catch {
      // passed over
    }
    const res = await original(input, init);
    if (/json/.test(res.headers.get('content-type') ?? '')) {
      const reading = res.clone().text().then((text) => walk(JSON.parse(text), ANSWER_FIELDS, 'answered'))
        .catch(() => undefined).finally(() => pending.delete(reading));
      pending.add(reading);
    }
    return res;
  };
}

// ---- the search ----

function report(kind: 'leak' | 'scanned', entry: Record<string, unknown>): void {
  appendFileSync(join(DIR!, `${kind}-${process.pid}.jsonl`), `${JSON.stringify({ file, ...entry })}\n`);
}

function search(where: string, text: string): void {
  for (const [raw, s] of seen) {
    if (sentOpenly.has(raw)) continue;
    const form = s.forms.find((f) => text.includes(f));
    if (form === undefined) continue;
    const at = text.indexOf(form);
    report('leak', { where, origin: s.origin, context: text.slice(Math.max(0, at - 80), at + form.length + 40) });
  }
}

/**
 * The answers still being read, for at most a few seconds: one whose body never ends (a test that gave
 * up on it) must not hold a teardown; what was not read by then is not noted.
 */
async function answersRead(): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(pending), new Promise((resolve) => { timer = setTimeout(resolve, 3000); })]);
  clearTimeout(timer);
}

/** A service's log lines, searched when it stops. */
export async function scanLog(lines: string[]): Promise<void> {
  if (!scanning) return;
  await answersRead();
  const text = lines.join('\n');
  search('log', text);
  report('scanned', { log: lines.length, bytes: text.length, secrets: seen.size });
}

/** Every row of every table of a test database, as text, searched before it is dropped. */
export async function scanDatabase(url: string): Promise<void> {
  if (!scanning) return;
  await answersRead();
  const sql = postgres(url, { max: 1, onnotice: () => undefined, connect_timeout: 10, connection: { statement_timeout: 30_000 } });
  try {
    const tables = await sql<{ name: string }[]>`
      select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'r' and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg\\_%'`;
    let bytes = 0;
    for (const { name } of tables) {
      const rows = await sql.unsafe<{ row: string }[]>(`select t::text as row from ${name} t`);
      if (rows.length === 0) continue;
      const text = rows.map((r) => r.row).join('\n');
      bytes += text.length;
      search(`table ${name}`, text);
    }
    report('scanned', { database: tables.length, bytes, secrets: seen.size });
  } catch (err) {
    // A database the test already dropped or could not reach: said in the verdict, not a test failure.
    report('scanned', { database: 0, bytes: 0, secrets: seen.size, error: String(err) });
  } finally {
    await sql.end({ timeout: 1 });
  }
}
