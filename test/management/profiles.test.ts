import t from 'tap';
import { adminToken, startAuthService } from '../helpers/auth.js';
import { createEntity, createTenant, createUser, fails, ok } from '../helpers/management.js';

const SCHEMA = {
  type: 'object',
  required: ['serial'],
  properties: { serial: { type: 'string', minLength: 4 }, temp: { type: 'number' } },
};

t.test('profiles: seeding, versions, binding rules, attribute validation, isolation', async (t) => {
  const ts = await startAuthService(t);
  const admin = await adminToken(ts);
  const alice = await createUser(ts, 'alice');
  const bob = await createUser(ts, 'bob');
  const acme = await createTenant(ts, alice.token, 'Acme', 'acme');
  const globex = await createTenant(ts, bob.token, 'Globex', 'globex');

  const profileId = async (tenant: string, key: string) => {
    const data = await ok(ts, admin, `query ($t: ID!) { profiles(tenantId: $t, limit: 100) { items { id key } } }`, { t: tenant });
    return (data.profiles.items as { id: string; key: string }[]).find((p) => p.key === key)!.id;
  };

  await t.test('creating a tenant seeds the default device types, each with an active version 1', async (t) => {
    const data = await ok(ts, alice.token, `query ($t: ID!) { profiles(tenantId: $t) { total items { tenantId objectKind kind key displayName status } } }`, { t: acme });
    t.equal(data.profiles.total, 7);
    t.same(data.profiles.items.map((p: { kind: string; key: string }) => `${p.kind}/${p.key}`).sort(), [
      'application/application', 'device/client', 'device/gateway', 'device/water_meter', 'human/user', 'service/service_account', 'workload/workload',
    ]);
    t.ok(data.profiles.items.every((p: { tenantId: string; objectKind: string; status: string }) => p.tenantId === acme && p.objectKind === 'entity' && p.status === 'active'));
    const gateway = await profileId(acme, 'gateway');
    const versions = await ok(ts, alice.token, `query ($p: ID!) { profileVersions(profileId: $p) { version status jsonSchema uiSchema } }`, { p: gateway });
    t.same(versions.profileVersions, [{ version: 1, status: 'active', jsonSchema: {}, uiSchema: {} }]);
  });

  await t.test('creating profiles and versions: tenant admins in their tenant, platform-wide for platform admins', async (t) => {
    const created = await ok(ts, alice.token, `mutation ($t: ID!) { createProfile(input: {tenantId: $t, objectKind: "entity", kind: "device", key: "thermo", displayName: "Thermometer"}) { id key status } }`, { t: acme });
    t.match(created.createProfile, { key: 'thermo', status: 'active' });
    t.match(await fails(ts, bob.token, `mutation ($t: ID!) { createProfile(input: {tenantId: $t, objectKind: "entity", kind: "device", key: "x", displayName: "X"}) { id } }`, { t: acme }), [{ message: 'forbidden' }]);
    t.match(await fails(ts, alice.token, `mutation { createProfile(input: {objectKind: "entity", kind: "device", key: "global", displayName: "G"}) { id } }`), [{ message: 'forbidden' }]);
    t.match(await fails(ts, alice.token, `mutation ($t: ID!) { createProfile(input: {tenantId: $t, objectKind: "entity", kind: "device", key: "thermo", displayName: "Again"}) { id } }`, { t: acme }),
      [{ message: 'a profile with this key already exists in this tenant', extensions: { code: 'CONFLICT' } }]);
    await ok(ts, admin, `mutation { createProfile(input: {objectKind: "entity", kind: "device", key: "global", displayName: "Global"}) { id } }`);

    const thermo = created.createProfile.id;
    const v2 = await ok(ts, alice.token, `mutation ($p: ID!, $s: JSON) { createProfileVersion(profileId: $p, input: {version: 2, jsonSchema: $s, status: active}) { version status } }`, { p: thermo, s: SCHEMA });
    t.same(v2.createProfileVersion, { version: 2, status: 'active' });
    t.match(await fails(ts, alice.token, `mutation ($p: ID!) { createProfileVersion(profileId: $p, input: {version: 2}) { id } }`, { p: thermo }), [{ message: 'version must be greater than 2, the profile\'s latest' }]);
    t.match(await fails(ts, alice.token, `mutation ($p: ID!) { createProfileVersion(profileId: $p, input: {version: 3, jsonSchema: {type: "nonsense"}}) { id } }`, { p: thermo }), [{ message: /jsonSchema is not a valid JSON Schema/ }]);
    t.match(await fails(ts, bob.token, `mutation ($p: ID!) { createProfileVersion(profileId: $p, input: {version: 9}) { id } }`, { p: thermo }), [{ message: 'forbidden' }]);
  });

  const thermo = await profileId(acme, 'thermo');

  await t.test('attributes are validated against the bound version, naming each failing path', async (t) => {
    const errors = await fails(ts, alice.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: device, name: "t1", tenantId: $t, profileId: $p, attributes: {temp: "hot"}}) { id } }`, { t: acme, p: thermo });
    t.match(errors[0]!.message, /attributes do not match profile version 2: /);
    t.match(errors[0]!.message, "/ must have required property 'serial'");
    t.match(errors[0]!.message, '/temp must be number');
    t.equal(errors[0]!.extensions.code, 'BAD_REQUEST');
    const [{ count }] = await ts.service.sql<[{ count: number }]>`select count(*)::int as count from entities where name = 't1'`;
    t.equal(count, 0, 'nothing stored');

    const made = await ok(ts, alice.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: device, name: "t1", tenantId: $t, profileId: $p, attributes: {serial: "SN-0001", temp: 21.5}}) { id profileId profileVersionId } }`, { t: acme, p: thermo });
    const versions = await ok(ts, alice.token, `query ($p: ID!) { profileVersions(profileId: $p) { id version } }`, { p: thermo });
    t.equal(made.createEntity.profileVersionId, versions.profileVersions.find((v: { version: number }) => v.version === 2).id, 'binds the newest active version');
    const id = made.createEntity.id;
    t.match(await fails(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {attributes: {serial: "x"}}) { id } }`, { id }), [{ message: /\/serial must NOT have fewer than 4 characters/ }]);
    t.same((await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {attributes: {serial: "SN-0002"}}) { attributes } }`, { id })).updateEntity.attributes, { serial: 'SN-0002' });
    t.match(await fails(ts, alice.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: service, name: "s", tenantId: $t, profileId: $p}) { id } }`, { t: acme, p: thermo }),
      [{ message: 'profile thermo is for entity:device, not entity:service' }]);
  });

  await t.test('deprecated keeps existing bindings and refuses new ones; disabled cannot be bound', async (t) => {
    await ok(ts, alice.token, `mutation ($p: ID!) { updateProfile(id: $p, input: {status: deprecated}) { status } }`, { p: thermo });
    t.match(await fails(ts, alice.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: device, name: "t2", tenantId: $t, profileId: $p, attributes: {serial: "SN-0003"}}) { id } }`, { t: acme, p: thermo }),
      [{ message: 'profile thermo is deprecated and takes no new bindings' }]);
    const [bound] = await ts.service.sql<{ id: string }[]>`select id from entities where name = 't1'`;
    t.same((await ok(ts, alice.token, `mutation ($id: ID!) { updateEntity(id: $id, input: {attributes: {serial: "SN-0004"}}) { attributes } }`, { id: bound!.id })).updateEntity.attributes, { serial: 'SN-0004' }, 'the existing binding keeps working');
    await ok(ts, alice.token, `mutation ($p: ID!) { updateProfile(id: $p, input: {status: disabled}) { status } }`, { p: thermo });
    const gateway = await profileId(acme, 'gateway');
    await ok(ts, alice.token, `mutation ($p: ID!) { updateProfile(id: $p, input: {status: disabled}) { status } }`, { p: gateway });
    t.match(await fails(ts, alice.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: device, name: "g1", tenantId: $t, profileId: $p}) { id } }`, { t: acme, p: gateway }),
      [{ message: 'profile gateway is disabled' }]);
    const versions = await ok(ts, alice.token, `query ($p: ID!) { profileVersions(profileId: $p) { id } }`, { p: gateway });
    await ok(ts, alice.token, `mutation ($v: ID!) { updateProfileVersion(id: $v, input: {status: disabled}) { status } }`, { v: versions.profileVersions[0].id });
    t.match(await fails(ts, alice.token, `mutation ($v: ID!) { updateProfileVersion(id: $v, input: {status: active}) { status } }`, { v: versions.profileVersions[0].id }),
      [{ message: 'profile version status cannot change from disabled to active' }]);
  });

  await t.test('another tenant cannot see or bind this tenant\'s profiles', async (t) => {
    t.match(await fails(ts, bob.token, `query ($p: ID!) { profile(id: $p) { id } }`, { p: thermo }), [{ message: 'forbidden' }]);
    const bobs = await ok(ts, bob.token, `{ profiles(limit: 100) { total items { tenantId } } }`);
    t.ok(bobs.profiles.items.every((p: { tenantId: string | null }) => p.tenantId === globex || p.tenantId === null), 'only its own tenant and platform-wide ones');
    t.equal(bobs.profiles.total, 8);
    const client = await profileId(acme, 'client');
    t.match(await fails(ts, bob.token, `mutation ($t: ID!, $p: ID!) { createEntity(input: {kind: device, name: "stolen", tenantId: $t, profileId: $p}) { id } }`, { t: globex, p: client }),
      [{ message: 'profileId does not name a profile of this tenant' }]);
  });

  await t.test('entities filter by profileId', async (t) => {
    const client = await profileId(acme, 'client');
    await createEntity(ts, alice.token, { kind: 'device', name: 'c1', tenantId: acme, profileId: client });
    await createEntity(ts, alice.token, { kind: 'device', name: 'c2', tenantId: acme, profileId: client });
    await createEntity(ts, alice.token, { kind: 'device', name: 'plain', tenantId: acme });
    const data = await ok(ts, alice.token, `query ($t: ID!, $p: ID!) { entities(tenantId: $t, profileId: $p, order: name) { total items { name } } }`, { t: acme, p: client });
    t.same(data.entities, { total: 2, items: [{ name: 'c1' }, { name: 'c2' }] });
  });

  await t.test('profile changes are audited', async (t) => {
    await ts.service.audit.flush();
    const rows = await ts.service.sql<{ event: string }[]>`select distinct event from audit_log where tenant_id = ${acme} and event like 'profile%' order by event`;
    t.same(rows.map((r) => r.event), ['profile.create', 'profile.update', 'profile_version.create', 'profile_version.update']);
  });
});
