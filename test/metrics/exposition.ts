// A strict reader of the Prometheus text exposition format (version 0.0.4): every line is a HELP, a TYPE
// or a sample, names and label names are well-formed, label values use only the three escapes, every
// sample belongs to a family declared before it, no series appears twice, and histograms are whole.
export interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
}

export interface Exposition {
  families: Map<string, Family>;
  series: Series[];
  /** The value of one series (exact labels), or undefined. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Sum over every series of the name whose labels include these. */
  sum(name: string, labels?: Record<string, string>): number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Record<string, string[]> = { histogram: ['_bucket', '_sum', '_count'], summary: ['_sum', '_count', ''] };

function parseValue(text: string, line: number): number {
  // Prometheus reads values with Go's strconv.ParseFloat, which takes NaN and Inf in any case: prom-client
  // writes 'Nan' (an event-loop lag histogram with no samples yet).
  if (/^\+?inf$/i.test(text)) return Infinity;
  if (/^-inf$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value '${text}'`);
  return Number(text);
}

/** Labels from just after '{': returns them and the index after '}'. */
function parseLabels(text: string, start: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start;
  for (;;) {
    if (text[i] === '}') return { labels, end: i + 1 };
    const eq = text.indexOf('=', i);
    if (eq < 0) throw new Error(`line ${line}: label without '='`);
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: bad label name '${name}'`);
    if (name in labels) throw new Error(`line ${line}: label '${name}' twice`);
    if (text[eq + 1] !== '"') throw new Error(`line ${line}: label value not quoted`);
    let value = '';
    let j = eq + 2;
    for (;;) {
      const c = text[j];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const n = text[j + 1];
        if (n === '\\') value += '\\';
        else if (n === '"') value += '"';
        else if (n === 'n') value += '\n';
        else throw new Error(`line ${line}: bad escape '\\${n}'`);
        j += 2;
        continue;
      }
      value += c;
      j++;
    }
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`line ${line}: expected ',' or '}' after a label`);
  }
}

export function parseExposition(text: string): Exposition {
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  const series: Series[] = [];
  const seen = new Set<string>();
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw === '') return;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!m) {
        if (/^# (HELP|TYPE)\b/.test(raw)) throw new Error(`line ${line}: malformed ${raw}`);
        return; // a comment
      }
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name '${name}'`);
      if (kind === 'HELP') {
        if (helps.has(name)) throw new Error(`line ${line}: second HELP for ${name}`);
        helps.set(name, rest);
      } else {
        if (!TYPES.has(rest)) throw new Error(`line ${line}: unknown type '${rest}'`);
        if (families.has(name)) throw new Error(`line ${line}: second TYPE for ${name}`);
        if (series.some((s) => s.name === name)) throw new Error(`line ${line}: TYPE for ${name} after its samples`);
        families.set(name, { name, type: rest, help: helps.get(name) ?? '' });
      }
      return;
    }
    const nameEnd = raw.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`line ${line}: not a sample: ${raw}`);
    const name = raw.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name '${name}'`);
    let labels: Record<string, string> = {};
    let rest = raw.slice(nameEnd);
    if (rest.startsWith('{')) {
      const parsed = parseLabels(raw, nameEnd + 1, line);
      labels = parsed.labels;
      rest = raw.slice(parsed.end);
    }
    const parts = rest.split(' ');
    if (parts[0] !== '' || parts.length < 2 || parts.length > 3) throw new Error(`line ${line}: expected ' value [timestamp]': ${raw}`);
    const value = parseValue(parts[1] as string, line);
    if (parts[2] !== undefined && !/^-?\d+$/.test(parts[2])) throw new Error(`line ${line}: bad timestamp`);
    const family = familyOf(name, families);
    if (!family) throw new Error(`line ${line}: sample ${name} has no TYPE before it`);
    if (family.type === 'histogram' && name.endsWith('_bucket') && !('le' in labels)) throw new Error(`line ${line}: bucket without le`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) throw new Error(`line ${line}: series ${key} twice`);
    seen.add(key);
    series.push({ name, labels, value });
  });
  checkHistograms(families, series);
  const matches = (s: Series, labels: Record<string, string>) => Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  return {
    families,
    series,
    value(name, labels = {}) {
      const n = Object.keys(labels).length;
      return series.find((s) => s.name === name && Object.keys(s.labels).length === n && matches(s, labels))?.value;
    },
    sum(name, labels = {}) {
      return series.filter((s) => s.name === name && matches(s, labels)).reduce((a, s) => a + s.value, 0);
    },
  };
}

function familyOf(sample: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(sample);
  if (direct && (direct.type !== 'histogram')) return direct;
  for (const [type, suffixes] of Object.entries(SUFFIXES)) {
    for (const suffix of suffixes) {
      if (suffix === '' || !sample.endsWith(suffix)) continue;
      const f = families.get(sample.slice(0, -suffix.length));
      if (f && f.type === type) return f;
    }
  }
  return undefined;
}

/** Buckets cumulative and ending in +Inf equal to _count, per series of each histogram. */
function checkHistograms(families: Map<string, Family>, series: Series[]): void {
  for (const f of families.values()) {
    if (f.type !== 'histogram') continue;
    const groups = new Map<string, { buckets: [number, number][]; count?: number }>();
    const keyOf = (labels: Record<string, string>) => JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'le').sort());
    for (const s of series) {
      if (s.name === `${f.name}_bucket`) {
        const g = groups.get(keyOf(s.labels)) ?? { buckets: [] };
        g.buckets.push([s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
        groups.set(keyOf(s.labels), g);
      } else if (s.name === `${f.name}_count`) {
        const g = groups.get(keyOf(s.labels)) ?? { buckets: [] };
        g.count = s.value;
        groups.set(keyOf(s.labels), g);
      }
    }
    for (const [key, g] of groups) {
      const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < sorted.length; i++) {
        if ((sorted[i] as [number, number])[1] < (sorted[i - 1] as [number, number])[1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
      }
      const last = sorted[sorted.length - 1];
      if (!last || last[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
      if (last[1] !== g.count) throw new Error(`${f.name}${key}: +Inf bucket ${last[1]} differs from _count ${g.count}`);
    }
  }
}
