// The README's "First steps" run as written: its ```sh blocks, in order, in one bash, with real curl, jq
// and mosquitto_pub against a started service (the address lines pointed at its port-0 listeners).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
/** The MQTT-over-TLS command the prose gives for a service started with a TLS certificate (not a default step). */
const mqttsCommand = /```\n(mosquitto_pub [^`]*-p 8883[^`]*)```/.exec(steps)?.[1] ?? '';

/** Address lines of the first block: `NAME=value   # what (SVC_X_ADDR)`. */
const ADDRESS_LINE = /^(\w+)=(\S+)\s+#.*\((SVC_[A-Z_]+_ADDR)\)\s*$/;

/**
 * The listener a setting configures (its name in service.ports) and its default port, found by setting it
 * and seeing what moved. The enrollment listener's address sits with the certificate authority's settings.
 */
function listenerOf(setting: string): { name: string; defaultPort: number | undefined } {
  const moved = loadConfig({ [setting]: '127.0.0.9:9' });
  if (moved.pki.enrollment.listen?.host === '127.0.0.9') return { name: 'enrollment', defaultPort: loadConfig({}).pki.enrollment.listen?.port };
  const listeners = moved.listeners as Record<string, { host: string } | null>;
  const key = Object.keys(listeners).find((k) => listeners[k]?.host === '127.0.0.9');
  if (!key) throw new Error(`${setting} is not a listener setting`);
  const defaults = loadConfig({}).listeners as Record<string, { port: number } | null>;
  // config keys are camelCase (brokerAdmin), service.ports names snake_case (broker_admin).
  return { name: key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), defaultPort: defaults[key]?.port };
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

function runBash(script: string, dir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir, env: { ...process.env, TMPDIR: dir } });
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
  const lines = (blocks[0] as string).split('\n').filter((l) => ADDRESS_LINE.test(l));
  t.ok(lines.length >= 5, 'management, ingest, reader, MQTT and enrollment addresses are given');
  for (const line of lines) {
    const [, , value, setting] = ADDRESS_LINE.exec(line) as RegExpExecArray;
    const port = Number(/(\d+)$/.exec(value as string)?.[1]);
    t.equal(port, listenerOf(setting as string).defaultPort, `${line.trim()}: the default port of ${setting}`);
  }
  // The development CA's directory as the quick start makes it (SVC_DATA_DIR/pki, from the project directory).
  const pki = /^PKI=\$PWD\/(\S+)\s/m.exec(blocks[0] as string)?.[1];
  t.equal(pki && path.resolve(projectRoot, pki), loadConfig({}, projectRoot).pki.devCa.files.dir, 'PKI is where the development CA is written');
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
  // The quick start's development CA, asked for here because tests run on DATABASE_URL; enrollment and
  // the HTTP/1.0 publication listener (where the certificates' OCSP URL points) on port 0.
  const scratch = mkdtempSync(path.join(tmpdir(), 'readme-walkthrough-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const ts = await startTestService(t, {
    ...AUTH_ENV, SVC_MQTT_ADDR: '127.0.0.1:0', SVC_PKI_DEV_CA: 'on', SVC_DATA_DIR: path.join(scratch, 'data'),
    SVC_PKI_ENROLLMENT_LISTEN_ADDR: '127.0.0.1:0', SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0',
    // As the prose says to start it for MQTT over TLS: the development CA's server certificate.
    SVC_MQTT_TLS_CERT_PATH: path.join(scratch, 'data', 'pki', 'enrollment-server.pem'),
    SVC_MQTT_TLS_KEY_PATH: path.join(scratch, 'data', 'pki', 'enrollment-server.key'), SVC_MQTTS_ADDR: '127.0.0.1:0',
  });
  const ports = ts.service.ports as Record<string, number>;

  const seen = new Set<string>();
  const first = (blocks[0] as string).split('\n').map((line) => {
    const assignment = /^(\w+)=/.exec(line)?.[1];
    if (assignment) seen.add(assignment);
    if (assignment === 'HOST') return 'HOST=127.0.0.1';
    if (assignment === 'ADMIN_PASSWORD') return `ADMIN_PASSWORD='${ADMIN_SECRET}'`;
    if (assignment === 'PKI') return `PKI='${ts.service.config.pki.devCa.files.dir}'`;
    const address = ADDRESS_LINE.exec(line);
    if (!address) return line;
    const listener = listenerOf(address[3] as string);
    const port = ports[listener.name];
    if (port === undefined) throw new Error(`the test service runs no ${listener.name} listener`);
    // The default port as a whole number (`http://$HOST:8080`, `MQTT_PORT=1883`) becomes the running one.
    return line.replace(new RegExp(`(?<![0-9])${listener.defaultPort}(?![0-9])`), String(port));
  });
  t.ok(seen.has('HOST') && seen.has('ADMIN_PASSWORD') && seen.has('PKI'), 'the first block sets HOST, PKI and ADMIN_PASSWORD');

  t.match(mqttsCommand, /--cert sensor-2\.pem --key sensor-2\.key/, 'the README gives the MQTT over TLS command');
  const mqtts = mqttsCommand.replace(/-p 8883/, `-p ${ports.mqtts}`);
  // The same with the revoked certificate and its device's key: the prose says the connection is refused.
  const revoked = mqtts.replace(/sensor-2/g, 'sensor-1').replace(/\$DEVICE2/g, '$DEVICE').replace(/\$KEY2/g, '$KEY');
  const script = ['set -euo pipefail', first.join('\n'),
    ...blocks.slice(1).map((block, i) => `printf '\\n@@step %d\\n' ${i + 1}\n${block}`),
    `printf '\\n@@mqtts\\n'\n${mqtts}\nprintf '\\n@@mqtts published\\n'`,
    `if ${revoked.trim()} 2>/dev/null; then echo '@@revoked connected'; else echo '@@revoked refused'; fi`,
    `printf '\\n@@vars %s %s %s\\n' "$TENANT" "$CHANNEL" "$DEVICE"`].join('\n');
  // `mktemp -d` of the certificate blocks lands in the test's scratch directory.
  const run = await runBash(script, scratch);
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
    select protocol, publisher_id, workspace_id from messages where channel_id = ${channel as string} and publisher_id = ${device as string}
    order by protocol`;
  t.same(rows.map((r) => [r.protocol, r.publisher_id, r.workspace_id]), [['http', device, tenant], ['mqtt', device, tenant]]);

  // The prose after the blocks: another action is refused, default deny.
  const admin = await fetch(`${ts.url()}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'admin', secret: ADMIN_SECRET }) }).then((r) => r.json()) as { token: string };
  const denied = await fetch(`${ts.url()}/authz/check`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token}` },
    body: JSON.stringify({ subject_id: device, action: 'delete', resource_id: channel }) }).then((r) => r.json()) as { allowed: boolean; reason: string };
  t.same({ allowed: denied.allowed, reason: denied.reason }, { allowed: false, reason: 'no matching allow policy' });
  t.match(steps, /"action": "delete"[\s\S]*no matching allow\s+policy/, 'as the README says');

  // The certificate blocks: issued and verified, OCSP good at the URL it carries, a second device enrolled
  // over EST and verified, then revoked and OCSP says so (each as the prose after its block says).
  t.match(output('openssl verify -CAfile trust-bundle.pem -untrusted chain.pem sensor-1.pem'), /^sensor-1\.pem: OK$/m, 'openssl verify: OK');
  t.match(steps, /prints `sensor-1\.pem: OK`/, 'as the README says');
  const ocspGood = output('OCSP_URL=$(openssl x509');
  t.match(ocspGood, /^sensor-1\.pem: good$/m, `openssl ocsp at the certificate's URL: good (${ocspGood.trim()})`);
  t.match(steps, /answers `sensor-1\.pem: good`/, 'as the README says');
  t.match(output('simpleenroll'), /^sensor-2\.pem: OK$/m, 'the EST certificate verifies');
  const ocspRevoked = output('revokeCertificateV2');
  t.match(ocspRevoked, /^sensor-1\.pem: revoked$/m, `after revocation: revoked (${ocspRevoked.trim()})`);
  t.match(ocspRevoked, /Reason: keyCompromise/, 'with the reason');
  t.match(steps, /Now `sensor-1\.pem: revoked`/, 'as the README says');

  // MQTT over TLS with the EST certificate (and the device's key): published and stored; the revoked one is refused.
  t.match(run.stdout, /@@mqtts published/, 'mosquitto_pub over TLS with sensor-2.pem published');
  const [device2] = await ts.service.sql<{ publisher_id: string }[]>`
    select publisher_id from messages where channel_id = ${channel as string} and publisher_id <> ${device as string}`;
  t.ok(device2, 'the message of sensor-2 is stored');
  t.match(run.stdout, /@@revoked refused/, 'with the revoked sensor-1.pem the connection is refused');
});
