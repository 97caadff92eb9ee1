// What the docs say about settings, checked against src/config.ts: the names loadConfig reads, the
// setting tables of a markdown page, and whether a documented default is the one loadConfig applies.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { loadConfig } from '../../src/config.js';
import { projectRoot, sourceDir } from '../../src/paths.js';

const NAME = /^[A-Z][A-Z0-9_]*$/;

/** loadConfig over an env that records every key asked for; every value is `value` (undefined: unset). */
function recordReads(value: string | undefined, into: Set<string>): void {
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(_target, key) {
      if (typeof key === 'string' && NAME.test(key)) into.add(key);
      return value;
    },
  });
  try {
    loadConfig(env);
  } catch {
    // With every setting set to '1' the configuration is invalid; the reads before the throw are what counts.
  }
}

/** Names passed literally to a config reader anywhere under src/ (settings read only on some paths). */
function scanReaderCalls(): Set<string> {
  const found = new Set<string>();
  const call = /\b(?:r|reader)\.(?:int|bool|string|optional|secret|addr|url|list|key|oneOf)\(\s*['"]([A-Z][A-Z0-9_]*)['"]/g;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts')) for (const m of readFileSync(full, 'utf8').matchAll(call)) found.add(m[1] as string);
    }
  };
  walk(sourceDir);
  return found;
}

/**
 * Every environment variable the configuration reads: loadConfig instrumented with nothing set and with
 * everything set (so reads behind a switch happen too, and names built at run time are seen), plus the
 * names the source passes to a reader literally.
 */
export function settingsRead(): Set<string> {
  const names = scanReaderCalls();
  recordReads(undefined, names);
  recordReads('1', names);
  return names;
}

export interface SettingRow {
  file: string;
  line: number;
  name: string;
  defaultCell: string;
  meaning: string;
}

/**
 * Rows of the markdown tables whose header names a `setting` column and a `default` column; a row's
 * setting cell must hold exactly one backticked name.
 */
export function settingRows(file: string): { rows: SettingRow[]; malformed: string[] } {
  const text = readFileSync(path.join(projectRoot, file), 'utf8');
  const lines = text.split('\n');
  const rows: SettingRow[] = [];
  const malformed: string[] = [];
  let columns: string[] | null = null;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (!line.startsWith('|')) {
      columns = null;
      return;
    }
    const cells = line.replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
    if (columns === null) {
      columns = cells.map((c) => c.toLowerCase());
      return;
    }
    if (cells.every((c) => /^:?-+:?$/.test(c))) return;
    const nameAt = columns.indexOf('setting');
    const defaultAt = columns.indexOf('default');
    if (nameAt < 0 || defaultAt < 0) return;
    const m = /^`([A-Z][A-Z0-9_]*)`$/.exec(cells[nameAt] ?? '');
    if (!m) {
      malformed.push(`${file}:${i + 1}: the setting cell must be one backticked name: ${cells[nameAt]}`);
      return;
    }
    const meaningAt = columns.indexOf('meaning');
    rows.push({
      file, line: i + 1, name: m[1] as string, defaultCell: cells[defaultAt] ?? '',
      meaning: meaningAt < 0 ? '' : (cells[meaningAt] ?? ''),
    });
  });
  return { rows, malformed };
}

/** A default cell that is one backticked value (`10`, `info`) is checked; prose ("unset", "cores − 1") is not. */
export function literalDefault(cell: string): string | undefined {
  return /^`([^`]*)`$/.exec(cell)?.[1];
}

/** Switches behind which some settings are read at all (MQTTS needs a certificate and key to exist). */
export const BASE_ENVS: Record<string, string>[] = [
  {},
  { SVC_MQTT_TLS_CERT_PATH: '/nonexistent/cert.pem', SVC_MQTT_TLS_KEY_PATH: '/nonexistent/key.pem' },
];

function comparable(env: Record<string, string>) {
  // Which listeners were left at their built-in address records *whether* they were set, not their value.
  const { listenersAtDefault: _set, ...rest } = loadConfig(env);
  return rest;
}

/**
 * Null when setting `name` to `value` leaves the loaded configuration exactly as with `name` unset, under
 * every base env: then `value` is the default loadConfig applies. Otherwise, what differs.
 */
export function differsFromDefault(name: string, value: string): string | null {
  for (const base of BASE_ENVS) {
    let withValue;
    try {
      withValue = comparable({ ...base, [name]: value });
    } catch (err) {
      return `${name}=${value} is refused: ${(err as Error).message}`;
    }
    if (!isDeepStrictEqual(withValue, comparable(base))) return `${name}=${value} loads a different configuration than leaving it unset`;
  }
  return null;
}
