// The secret scan (issue 35.5, SECURITY.md "What is logged"): a representative run creates and uses every
// kind of secret the service handles, with its log at debug level captured line by line, then the log and
// a pg_dump of the run's whole database are searched for each secret's value, in plain text and as base64,
// base64url and hex. Secrets: the key-encryption keys, the administrator's password and a user's (set, used, mistyped), session JWTs,
// a shared key (created, used to publish over HTTP, mistyped), an access token (created, used), a generated
// private key (issueGeneratedCertificateV2), the CA key-encryption key and the platform intermediate's key
// (read at start), and a custom endpoint call carrying a password in its body and a shared key in its
// answer. A planted canary in both places proves the scan finds what it looks for.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import t from 'tap';
import { createLogger } from '../../../src/log.js';
import { ADMIN_SECRET, AUTH_ENV, accessTokenFor, adminToken, login, setPassword } from '../../helpers/auth.js';
import { createEndpoint, callEndpoint, executionsOf } from '../../custom-endpoints/helpers.js';
import { createEntity, createTenant, ok } from '../../helpers/management.js';
import { ISSUE_GENERATED, makeCaFiles } from '../../helpers/pki.js';
import { forms, leaks, pemBody } from '../../helpers/secret-scan.js';
import { gql, startTestService } from '../../helpers/service.js';
import { grant, insertChannel, publish } from '../../messaging/helpers.js';

const run = promisify(execFile);

t.test('no secret created by a representative run is in the log or the database', async (t) => {
  const lines: string[] = [];
  const log = createLogger('debug', (line) => { lines.push(line); });
  const ca = makeCaFiles(t);
  // As production runs: the JWT signing keys and the token-hash key sealed (unset, they are stored in plaintext, as documented).
  const kek = randomBytes(32).toString('base64');
  const ts = await startTestService(t, { ...AUTH_ENV, ...ca.env, SVC_KEY_ENCRYPTION_KEY: kek, SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' }, undefined, { log });
  const secrets: Record<string, string | Buffer> = {
    'administrator password': ADMIN_SECRET,
    'key-encryption key': kek,
    'CA key-encryption key': ca.env.SVC_PKI_CA_KEY_ENCRYPTION_KEY as string,
    'platform intermediate private key': pemBody(readFileSync(ca.intermediateKey, 'utf8')),
  };

  const admin = await adminToken(ts);
  secrets['administrator session JWT'] = admin;
  // A mistyped administrator password is a near-secret too (often one character off).
  const wrongAdmin = `${ADMIN_SECRET}-typo`;
  t.ok((await gql(ts.url(), 'mutation ($i: LoginInput!) { login(input: $i) { token } }', { i: { identifier: 'admin', secret: wrongAdmin } })).body.errors, 'wrong password refused');
  secrets['mistyped administrator password'] = wrongAdmin;

  const tenantId = await createTenant(ts, admin, 'secrets', 'secrets');
  const user = await createEntity(ts, admin, { kind: 'human', name: 'secret-user' });
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await setPassword(ts, user, password);
  secrets['user password'] = password;
  const session = await login(ts, user, password);
  secrets['user session JWT'] = session.token;

  const device = await createEntity(ts, admin, { kind: 'device', name: 'secret-device', tenantId });
  const sharedKey = (await ok(ts, admin, 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', { e: device })).createSharedKey.key as string;
  secrets['shared key'] = sharedKey;
  const channel = await insertChannel(ts, tenantId);
  await grant(ts, tenantId, device, channel, ['publish']);
  const senml = [{ n: 'temp', v: 21 }];
  t.equal((await publish(ts, tenantId, channel, sharedKey, senml)).status, 202, 'published with the shared key');
  const wrongKey = `${sharedKey.slice(0, -2)}zz`;
  t.equal((await publish(ts, tenantId, channel, wrongKey, senml)).status, 401, 'a mistyped key is refused');
  secrets['mistyped shared key'] = wrongKey;

  const access = await accessTokenFor(ts, admin);
  secrets['access token'] = access.token;
  t.equal((await gql(ts.url(), 'query ($id: ID!) { entity(id: $id) { id } }', { id: user }, access.token)).body.data?.entity?.id, user, 'the access token works');

  const generated = (await ok(ts, admin, ISSUE_GENERATED, { i: { entityId: device, idempotencyKey: 'secret-scan-1' } })).issueGeneratedCertificateV2;
  t.match(generated.privateKeyPem, /BEGIN PRIVATE KEY/, 'a private key was generated and answered once');
  secrets['generated private key'] = pemBody(generated.privateKeyPem);

  // A custom endpoint that takes a password in its body and answers a new shared key.
  const endpointPassword = `ep-${randomBytes(12).toString('hex')}`;
  const setPw = await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/set-password', operationKind: 'mutation',
    graphql: 'mutation ($e: ID!, $pw: String!) { createPassword(entityId: $e, password: $pw) }',
    variablesMapping: { e: '$body.entity', pw: '$body.password' },
  });
  const newKey = await createEndpoint(ts, {
    method: 'POST', path: '/api/custom/new-key', operationKind: 'mutation',
    graphql: 'mutation ($e: ID!) { createSharedKey(entityId: $e, input: {}) { key } }', variablesMapping: { e: '$body.entity' },
  });
  t.equal((await callEndpoint(ts, '/api/custom/set-password', { method: 'POST', token: admin, body: { entity: user, password: endpointPassword } })).status, 200);
  secrets['password sent to a custom endpoint'] = endpointPassword;
  const keyCall = await callEndpoint(ts, '/api/custom/new-key', { method: 'POST', token: admin, body: { entity: device } });
  t.equal(keyCall.status, 200);
  const endpointKey = JSON.stringify(keyCall.body).match(/"key":"([^"]+)"/)?.[1];
  t.ok(endpointKey, 'the endpoint answered a shared key');
  secrets['shared key answered by a custom endpoint'] = endpointKey as string;
  t.equal((await executionsOf(ts, setPw.id)).length + (await executionsOf(ts, newKey.id)).length, 2, 'both calls are in the execution log');

  // Canaries planted in both places: the scan must find them in every form it searches.
  const canary = `canary-${randomBytes(8).toString('hex')}`;
  const canaryKey = randomBytes(32);
  log.info('canary', { note: Buffer.from(canary).toString('base64') });
  await ts.service.sql`update entities set attributes = ${ts.service.sql.json({ planted: canaryKey.toString('hex') })} where id = ${device}`;

  await ts.service.customEndpoints.executions.flush();
  await ts.service.audit.flush?.();
  const { stdout: dump } = await run('pg_dump', ['--data-only', '--no-owner', ts.db.url], { maxBuffer: 512 * 1024 * 1024 });
  const logText = lines.join('\n');
  t.ok(lines.length > 20 && dump.length > 10_000, `${lines.length} log lines, ${dump.length} bytes of database dump searched`);
  t.same(leaks({ canary, 'canary key': canaryKey }, logText), ['canary'], 'the scan finds a secret logged as base64');
  t.same(leaks({ canary, 'canary key': canaryKey }, dump), ['canary key'], 'the scan finds a key stored as hex');
  t.same(leaks(secrets, logText), [], `none of ${Object.keys(secrets).length} secrets in the log`);
  const stored = leaks(secrets, dump);
  t.same(stored, [], `none of ${Object.keys(secrets).length} secrets in the database`);
  for (const name of stored) {
    const form = forms(secrets[name]!).find((f) => dump.includes(f))!;
    const at = dump.indexOf(form);
    t.comment(`${name} stored as '${form.slice(0, 16)}…': ${dump.slice(dump.lastIndexOf('\nCOPY ', at), dump.indexOf('\n', dump.lastIndexOf('\nCOPY ', at) + 1))}`);
  }
});
