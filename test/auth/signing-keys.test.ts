import { createPublicKey, verify } from 'node:crypto';
import t from 'tap';
import { ADMIN_SECRET, AUTH_ENV, adminToken, insertEntity, login, startAuthService, tokenFor } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';

const KEYS = `query { signingKeys { kid status algorithm storageMode keyEncryptionKeyId } }`;
const WHO = `query ($id: ID!) { session(id: $id) { id } }`;
const jwks = async (base: string) => (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as { keys: Record<string, string>[] };
const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid as string;

t.test('JWKS publishes primary and standby; tokens verify against it with plain node:crypto', async (t) => {
  const ts = await startAuthService(t);
  const set = await jwks(ts.url());
  t.equal(set.keys.length, 2);
  for (const k of set.keys) t.match(k, { kty: 'EC', crv: 'P-256', x: String, y: String, kid: String, use: 'sig', alg: 'ES256' });
  const { token } = await login(ts, 'admin', ADMIN_SECRET);
  const jwk = set.keys.find((k) => k.kid === kidOf(token))!;
  const [h, c, s] = token.split('.') as [string, string, string];
  t.ok(verify('sha256', Buffer.from(`${h}.${c}`), { key: createPublicKey({ key: jwk as never, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url')));
  const keys = await gql(ts.url(), KEYS, {}, await adminToken(ts));
  t.same(keys.body.data?.signingKeys.map((k: { status: string }) => k.status).sort(), ['primary', 'standby']);
  t.equal(keys.body.data?.signingKeys[0].storageMode, 'plaintext', 'no SVC_KEY_ENCRYPTION_KEY: plaintext, and systemStatus says so');
  const status = await gql(ts.url(), `{ systemStatus { signingKeys { status message } signingKeyState { plaintextAllowed plaintextCount encryptedCount } } }`, {}, await adminToken(ts));
  t.match(status.body.data?.systemStatus, { signingKeys: { status: 'ok', message: /plaintext/ }, signingKeyState: { plaintextAllowed: true, plaintextCount: 2, encryptedCount: 0 } });
});

t.test('rotation is manage-protected and keeps old tokens verifying, on a fresh instance too', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const { token: old, sessionId } = await login(ts, 'admin', ADMIN_SECRET);
  const before = await jwks(ts.url());
  const user = await insertEntity(ts, { name: 'user' });
  const userToken = await tokenFor(ts, user);
  t.equal((await gql(ts.url(), `mutation { rotateSigningKeys }`, {}, userToken)).body.errors?.[0].message, 'forbidden');
  t.equal((await fetch(`${ts.url()}/auth/keys/rotate`, { method: 'POST' })).status, 401);
  t.equal((await fetch(`${ts.url()}/auth/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${userToken}` } })).status, 403);
  t.equal((await gql(ts.url(), `mutation { rotateSigningKeys }`, {}, admin)).body.data?.rotateSigningKeys, true);
  const after = await jwks(ts.url());
  t.equal(after.keys.length, 3, 'retired + new primary + new standby');
  t.ok(after.keys.some((k) => k.kid === kidOf(old)), 'the retired key is still published');
  const fresh = await login(ts, 'admin', ADMIN_SECRET);
  const standbyBefore = before.keys.find((k) => k.kid !== kidOf(old))!.kid;
  t.equal(kidOf(fresh.token), standbyBefore, 'the old standby signs now');

  const other = await startTestService(t, { ...AUTH_ENV }, ts.db);
  t.equal((await gql(other.url(), WHO, { id: sessionId }, old)).body.data?.session.id, sessionId, 'a second instance verifies the old token by its retired key');
  t.equal((await fetch(`${ts.url()}/auth/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${admin}` } })).status, 204);
  await ts.service.audit.flush();
  const [{ n }] = await ts.service.sql<[{ n: number }]>`select count(*)::int as n from audit_log where event = 'signing_key.rotate'`;
  t.equal(n, 2);
});

t.test('with a key-encryption key: keys sealed (plaintext ones upgraded); a wrong or missing key stops the start', async (t) => {
  const ts = await startAuthService(t);
  await ts.service.stop();
  const kek = Buffer.alloc(32, 7).toString('base64');
  const sealed = await startTestService(t, { ...AUTH_ENV, SVC_KEY_ENCRYPTION_KEY: kek }, ts.db);
  const keys = await gql(sealed.url(), KEYS, {}, (await login(sealed, 'admin', ADMIN_SECRET)).token);
  t.same(new Set(keys.body.data?.signingKeys.map((k: { storageMode: string }) => k.storageMode)), new Set(['encrypted']));
  t.match(keys.body.data?.signingKeys[0].keyEncryptionKeyId, /^kek:[0-9a-f]{16}$/);
  const [row] = await sealed.service.sql<{ material: Buffer; storage_mode: string }[]>`select material, storage_mode from auth_keys`;
  t.equal(row!.storage_mode, 'encrypted', 'the token hash key too');
  await sealed.service.stop();
  await t.rejects(startTestService(t, { ...AUTH_ENV }, ts.db), /encrypted under key-encryption key kek:[0-9a-f]+, but SVC_KEY_ENCRYPTION_KEY is not set/);
  await t.rejects(startTestService(t, { ...AUTH_ENV, SVC_KEY_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64') }, ts.db), /configure the key it was sealed with/);
});
