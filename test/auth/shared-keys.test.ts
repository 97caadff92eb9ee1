import { randomBytes, randomUUID } from 'node:crypto';
import t from 'tap';
import { CHOSEN_KEY_REFUSED } from '../../src/auth/credentials.js';
import { adminToken, insertEntity, insertTenant, login, startAuthService } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { waitUntil } from '../helpers/wait.js';

const CREATE_KEY = `mutation ($id: ID!, $input: CreateSharedKeyInput) { createSharedKey(entityId: $id, input: $input) { credentialId key expiresAt } }`;
const CREDS = `query ($id: ID!) { credentials(entityId: $id) { total items { id kind status expiresAt } } }`;

t.test('shared keys: non-human only, returned once, device authentication and shared-key login', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const tenant = await insertTenant(ts, 'fleet');
  const device = await insertEntity(ts, { name: 'meter-1', kind: 'device', tenantId: tenant });
  const human = await insertEntity(ts, { name: 'person' });

  const onHuman = await gql(ts.url(), CREATE_KEY, { id: human }, admin);
  t.match(onHuman.body.errors?.[0], { message: 'invalid value: shared keys are for non-human entities', extensions: { code: 'BAD_REQUEST' } });

  const created = (await gql(ts.url(), CREATE_KEY, { id: device, input: { description: 'factory key' } }, admin)).body.data!.createSharedKey;
  t.match(created, { credentialId: String, key: /^[A-Za-z0-9_-]{43}$/, expiresAt: null });
  const listed = await gql(ts.url(), CREDS, { id: device }, admin);
  t.same(listed.body.data?.credentials.items, [{ id: created.credentialId, kind: 'shared_key', status: 'active', expiresAt: null }]);
  t.notMatch(JSON.stringify(listed.body), created.key, 'the key is not shown again');

  const identity = await ts.service.auth.authenticateDeviceKey(created.key);
  t.same(identity, { entityId: device, tenantId: tenant, kind: 'device', status: 'active', credentialId: created.credentialId });
  t.equal(await ts.service.auth.authenticateDeviceKey('not-a-key-at-all'), null);

  const session = await login(ts, device, created.key, { kind: 'shared_key' });
  t.equal(session.entityId, device);
  t.equal(session.tenantId, tenant, 'a device session takes its home tenant');
  await t.rejects(login(ts, 'meter-1', created.key, { kind: 'shared_key' }), /invalid credentials/, 'a name is ambiguous without tenant context');
  t.equal((await login(ts, 'meter-1', created.key, { kind: 'shared_key', tenantId: tenant })).entityId, device, 'name within the tenant');
  await t.rejects(login(ts, device, 'wrong-key-wrong-key', { kind: 'shared_key' }), /invalid credentials/);
  await t.rejects(login(ts, device, created.key), /invalid credentials/, 'a key is not a password');

  t.equal((await gql(ts.url(), `mutation ($id: ID!) { revokeCredential(credentialId: $id) }`, { id: created.credentialId }, admin)).body.data?.revokeCredential, true);
  t.equal(await ts.service.auth.authenticateDeviceKey(created.key), null, 'revoked: refused at once on this instance');
  await t.rejects(login(ts, device, created.key, { kind: 'shared_key' }), /invalid credentials/);

  const chosen = (await gql(ts.url(), CREATE_KEY, { id: device, input: { key: 'legacy-client-secret-0001' } }, admin)).body.data!.createSharedKey;
  t.equal(chosen.key, 'legacy-client-secret-0001', 'a migrated client secret can be set');
  // Issue 21 point 5: a key already in use is refused exactly like a weak one (no oracle for device keys).
  const dup = await gql(ts.url(), CREATE_KEY, { id: device, input: { key: 'legacy-client-secret-0001' } }, admin);
  const short = await gql(ts.url(), CREATE_KEY, { id: device, input: { key: 'short' } }, admin);
  t.match(short.body.errors?.[0], { message: CHOSEN_KEY_REFUSED, extensions: { code: 'BAD_REQUEST' } });
  t.same(dup.body.errors?.map((e: { message: string; extensions: { code: string } }) => [e.message, e.extensions.code]),
    short.body.errors?.map((e: { message: string; extensions: { code: string } }) => [e.message, e.extensions.code]), 'a collision reads like any refusal');
  for (const weak of ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', '0123456789abcdef0123456789abcdef'.slice(0, 30), 'ABCDEFGHabcdefgh', 'ключ-устройства-0001-длинный', 'x'.repeat(300)]) {
    const res = await gql(ts.url(), CREATE_KEY, { id: device, input: { key: weak } }, admin);
    t.equal(res.body.errors?.[0]?.message, CHOSEN_KEY_REFUSED, `refused: ${weak.slice(0, 20)}...`);
  }
  for (const strong of [randomUUID(), randomBytes(16).toString('hex'), randomBytes(16).toString('base64url')]) {
    const res = await gql(ts.url(), CREATE_KEY, { id: device, input: { key: strong } }, admin);
    t.equal(res.body.data?.createSharedKey?.key, strong, `accepted: a random 128-bit key as ${strong.length} characters`);
  }

  const soon = (await gql(ts.url(), CREATE_KEY, { id: device, input: { expiresAt: new Date(Date.now() + 60_000).toISOString() } }, admin)).body.data!.createSharedKey;
  t.ok(await ts.service.auth.authenticateDeviceKey(soon.key), 'valid before expiry (and cached)');
  await ts.service.sql`update credentials set expires_at = now() - interval '1 second' where id = ${soon.credentialId}`;
  await waitUntil(async () => (await ts.service.auth.authenticateDeviceKey(soon.key)) === null);
  t.pass('expired key refused once the change is noticed');

  const other = (await gql(ts.url(), CREATE_KEY, { id: device }, admin)).body.data!.createSharedKey;
  t.ok(await ts.service.auth.authenticateDeviceKey(other.key));
  await ts.service.sql`update entities set status = 'inactive' where id = ${device}`;
  await waitUntil(async () => (await ts.service.auth.authenticateDeviceKey(other.key))?.status === 'inactive');
  t.pass('an entity status change reaches the device-key cache');
  await ts.service.sql`update entities set deleted_at = now() where id = ${device}`;
  await waitUntil(async () => (await ts.service.auth.authenticateDeviceKey(other.key)) === null);
  t.pass('a deleted device is refused');
});
