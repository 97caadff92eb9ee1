// The README's "First steps" run as written: its ```sh blocks, in order, in one bash, with real curl, jq
// and mosquitto_pub against a started service (the address lines pointed at its port-0 listeners).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config.js';
import { projectRoot } from '../../src/paths.js';
import { ADMIN_SECRET, AUTH_ENV } from '../helpers/auth.js';
import { startTestService } from '../helpers/service.js';

const HEADING = '## First steps';
const readme = readFileSync(path.join(projectRoot, 'README.md'), 'utf8');

function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "${heading}" section`);
  const end = markdown.indexOf('\n## ', start + heading.length + 2);
  return markdown.slice(start, end < 0 ? undefined : end);
}

const steps = section(readme, HEADING);
const blocks = [...steps.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string);

/** Address lines of the first block: `NAME=value   # what (SVC_X_ADDR)`. */
const ADDRESS_LINE = /^(\w+)=(\S+)\s+#.*\((SVC_[A-Z_]+_ADDR)\)\s*$/;

/** The listener (config.listeners key) a setting configures, found by setting it and seeing what moved. */
function listenerOf(setting: string): string {
  const moved = loadConfig({ [setting]: '127.0.0.9:9' }).listeners as Record<string, { host: string } | null>;
  const key = Object.keys(moved).find((k) => moved[k]?.host === '127.0.0.9');
  if (!key) throw new Error(`${setting} is not a listener setting`);
  return key;
}

/** Splits concatenated JSON texts (jq's pretty output followed by curl's compact one). */
function jsonValues(text: string): unknown[] {
  const values: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') {
      if (depth++ === 0) start = i;
    } else if ((ch === '}' || ch === ']') && --depth === 0) values.push(JSON.parse(text.slice(start, i + 1)));
  }
  return values;
}

function runBash(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('the address lines state the default ports config.ts applies', async (t) => {
  t.ok(blocks.length >= 4, `"${HEADING}" holds the walk-through's sh blocks (${blocks.length})`);
  const defaults = loadConfig({}).listeners as Record<string, { port: number } | null>;
  const lines = (blocks[0] as string).split('\n').filter((l) => ADDRESS_LINE.test(l));
  t.ok(lines.length >= 4, 'management, ingest, reader and MQTT addresses are given');
  for (const line of lines) {
    const [, , value, setting] = ADDRESS_LINE.exec(line) as RegExpExecArray;
    const port = Number(/(\d+)$/.exec(value as string)?.[1]);
    t.equal(port, defaults[listenerOf(setting as string)]?.port, `${line.trim()}: the default port of ${setting}`);
  }
});

t.test('the README sample of the generated-password line is the one the service logs', async (t) => {
  const source = readFileSync(path.join(projectRoot, 'src/auth/bootstrap.ts'), 'utf8');
  const msg = /log\.warn\('(GENERATED ADMINISTRATOR PASSWORD[^']*)'/.exec(source)?.[1];
  t.ok(msg, 'bootstrap.ts logs the generated password');
  const sample = /^\{.*"msg":"GENERATED ADMINISTRATOR PASSWORD.*\}$/m.exec(steps)?.[0] ?? '';
  t.equal(JSON.parse(sample.replace(/…/g, 'x')).msg, msg, 'same message text');
  t.match(sample, /"identifier":"admin","password":/, 'the fields it logs');
});

t.test('pasting the walk-through into bash works against a running service', async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_MQTT_ADDR: '127.0.0.1:0' });
  const ports = ts.service.ports as Record<string, number>;
  const defaults = loadConfig({}).listeners as Record<string, { port: number } | null>;

  const seen = new Set<string>();
  const first = (blocks[0] as string).split('\n').map((line) => {
    const assignment = /^(\w+)=/.exec(line)?.[1];
    if (assignment) seen.add(assignment);
    if (assignment === 'HOST') return 'HOST=127.0.0.1';
    if (assignment === 'ADMIN_PASSWORD') return `ADMIN_PASSWORD='${ADMIN_SECRET}'`;
    const address = ADDRESS_LINE.exec(line);
    if (!address) return line;
    const listener = listenerOf(address[3] as string);
    const port = ports[listener];
    if (port === undefined) throw new Error(`the test service runs no ${listener} listener`);
    // The default port as a whole number (`http://$HOST:8080`, `MQTT_PORT=1883`) becomes the running one.
    return line.replace(new RegExp(`(?<![0-9])${defaults[listener]?.port}(?![0-9])`), String(port));
  });
  t.ok(seen.has('HOST') && seen.has('ADMIN_PASSWORD'), 'the first block sets HOST and ADMIN_PASSWORD');

  const script = ['set -euo pipefail', first.join('\n'),
    ...blocks.slice(1).map((block, i) => `printf '\\n@@step %d\\n' ${i + 1}\n${block}`),
    `printf '\\n@@vars %s %s %s\\n' "$TENANT" "$CHANNEL" "$DEVICE"`].join('\n');
  const run = await runBash(script);
  const reached = [...run.stdout.matchAll(/@@step (\d+)/g)].map((m) => Number(m[1])).pop() ?? 0;
  t.equal(run.code, 0, run.code === 0 ? 'every block ran' : `block ${reached + 1} failed: ${run.stderr.slice(-2000)}`);
  if (run.code !== 0) return;

  const output = (containing: string) => {
    const i = blocks.findIndex((b) => b.includes(containing));
    t.ok(i > 0, `a block runs ${containing}`);
    return run.stdout.split(`@@step ${i}\n`)[1]?.split('\n@@')[0] ?? '';
  };
  const [, tenant, channel, device] = /@@vars (\S+) (\S+) (\S+)/.exec(run.stdout) ?? [];

  t.match(output('mosquitto_pub'), /^202$/m, 'curl published over HTTP: 202');

  const [read, check] = jsonValues(output('/authz/check')) as [any, any];
  t.equal(read?.total, 2, 'the reader returns both messages');
  t.same(read?.messages?.map((m: any) => m.protocol).sort(), ['http', 'mqtt'], 'one over HTTP, one over MQTT');
  t.same(read?.messages?.map((m: any) => `${m.name} ${m.unit} ${m.value}`).sort(), ['room-1:temp Cel 21.5', 'room-1:temp Cel 22'], 'resolved SenML');
  t.equal(check?.allowed, true, `POST /authz/check allows the device's publish: ${JSON.stringify(check)}`);

  // What was stored, read directly: both rows from the device, on the channel the walk-through created.
  const rows = await ts.service.sql<{ protocol: string; publisher_id: string; workspace_id: string }[]>`
    select protocol, publisher_id, workspace_id from messages where channel_id = ${channel as string} order by protocol`;
  t.same(rows.map((r) => [r.protocol, r.publisher_id, r.workspace_id]), [['http', device, tenant], ['mqtt', device, tenant]]);

  // The prose after the blocks: another action is refused, default deny.
  const admin = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'admin', secret: ADMIN_SECRET }) }).then((r) => r.json()) as { token: string };
  const denied = await fetch(`${ts.url()}/authz/check`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token}` },
    body: JSON.stringify({ subject_id: device, action: 'delete', resource_id: channel }) }).then((r) => r.json()) as { allowed: boolean; reason: string };
  t.same({ allowed: denied.allowed, reason: denied.reason }, { allowed: false, reason: 'no matching allow policy' });
  t.match(steps, /"action": "delete"[\s\S]*no matching allow\s+policy/, 'as the README says');
});
