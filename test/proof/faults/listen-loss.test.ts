// Issue 35.2: the LISTEN connection lost while grants, keys and revocations change. Two instances on one
// database; B has a publish decision, a device key and a good OCSP answer cached. B's LISTEN backend is
// killed and kept from coming back (B connects as a role of its own, which is briefly refused new
// connections), and while B hears nothing A withdraws a device's grant, revokes another device's shared
// key and revokes a certificate: their notifications are sent while B is away. Once B's LISTEN
// connection is back, B must not answer from what it had cached: the publish is refused, the key is
// refused, OCSP says revoked.
import postgres from 'postgres';
import t from 'tap';
import { AUTH_ENV, adminToken, startAuthService } from '../../helpers/auth.js';
import { withDatabase } from '../../helpers/database.js';
import { ok } from '../../helpers/management.js';
import { makeCaFiles } from '../../helpers/pki.js';
import { firstPem, issueLeaf, opensslOcsp, revokeLeaf, tempDir } from '../../helpers/publication.js';
import { startTestService } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';
import { grant, insertChannel, insertDevice, publish } from '../../messaging/helpers.js';
import { insertTenant } from '../../helpers/auth.js';

t.test('B\'s LISTEN connection lost while A changes a grant, a key and a revocation: no stale answer after it is back', async (t) => {
  const ca = makeCaFiles(t);
  const env = { ...ca.env, SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0' };
  const a = await startAuthService(t, env);

  // B's own login role (same password as the server's, where it has one), so its new connections can be
  // refused without touching A's.
  const role = `faults_b_${process.pid}`;
  const admin = postgres(a.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(async () => {
    await admin.unsafe(`drop role if exists ${role}`).catch(() => undefined);
    await admin.end();
  });
  const serverUrl = new URL(a.db.url);
  const password = decodeURIComponent(serverUrl.password);
  await admin.unsafe(`create role ${role} login superuser${password ? ` password '${password.replaceAll("'", "''")}'` : ''}`);
  const bUrl = new URL(withDatabase(a.db.url, a.db.name));
  bUrl.username = role;
  const b = await startTestService(t, { ...AUTH_ENV, ...env }, { url: bUrl.toString(), name: a.db.name, drop: async () => undefined });
  // B's connections end before the role is dropped: teardowns run last-registered first.
  t.teardown(() => admin`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${role}`.catch(() => undefined));

  // The world: a channel, a device allowed to publish (its grant goes), another whose key goes, a certificate.
  const token = await adminToken(a);
  const ws = await insertTenant(a, 'faults-listen');
  const channel = await insertChannel(a, ws);
  const [granted, keyed] = await Promise.all([insertDevice(a, ws), insertDevice(a, ws)]);
  await grant(a, ws, granted.id, channel, ['publish']);
  await grant(a, ws, keyed.id, channel, ['publish']);
  const file = tempDir(t);
  const leaf = await issueLeaf(a, token, ca.dir, granted.id);
  const issuer = file('issuer.pem', firstPem(leaf.chainPem));
  const leafFile = file('leaf.pem', leaf.certificatePem);
  const ocspOnB = () => opensslOcsp(b.url('pki_publication'), leaf.issuerId, { issuer, cafile: ca.root, cert: leafFile }, ['-no_nonce']);
  const publishOnB = async (key: string) => {
    const res = await publish(b, ws, channel, key, [{ n: 'x', v: 1 }]);
    await res.arrayBuffer();
    return res.status;
  };

  // B caches: both devices' keys and publish decisions, the good OCSP answer (signed once, then cached).
  t.equal(await publishOnB(granted.key), 202, 'B stores a publish of the granted device');
  t.equal(await publishOnB(keyed.key), 202, 'and of the keyed one');
  t.match(await ocspOnB(), /leaf\.pem: good/, 'B\'s OCSP says good');
  const signed = b.service.pki.publishing.ocsp.stats.signed;
  t.match(await ocspOnB(), /leaf\.pem: good/, 'and again');
  t.equal(b.service.pki.publishing.ocsp.stats.signed, signed, 'B answers OCSP from its cache');

  // B loses its LISTEN connection and cannot get it back for now.
  const hub = b.service.hub;
  const reconnects = hub.reconnects;
  await admin.unsafe(`alter role ${role} nologin`);
  let restored = false;
  try {
    await admin`select pg_terminate_backend(${hub.backendPid!})`;
    await waitUntil(() => !hub.connected, 5000, 'B notices its LISTEN connection is gone');

    // Meanwhile, on A: the grant withdrawn (GraphQL), the key revoked (GraphQL), the certificate revoked.
    const [policy] = await a.service.sql<{ id: string }[]>`select id from direct_policies where entity_id = ${granted.id}`;
    await ok(a, token, `mutation ($id: ID!) { deleteDirectPolicy(id: $id) }`, { id: policy!.id });
    await ok(a, token, `mutation ($c: ID!, $e: ID) { revokeCredential(credentialId: $c, entityId: $e) }`, { c: keyed.credentialId, e: keyed.id });
    await revokeLeaf(a, token, leaf, 'key_compromise');
    t.equal(hub.reconnects, reconnects, 'B was away for all three changes');
    // What B answers while away (from its caches: it cannot know yet), for the record; not asserted, as a
    // cache miss would need a new connection, which B's role is refused right now.
    t.comment(`while away, B answers: OCSP ${/: (\w+)/.exec(await ocspOnB())?.[1] ?? '?'}`);

    await admin.unsafe(`alter role ${role} login`);
    restored = true;
  } finally {
    if (!restored) await admin.unsafe(`alter role ${role} login`);
  }
  await waitUntil(() => hub.reconnects > reconnects, 15_000, 'B\'s LISTEN connection back');

  t.equal(await publishOnB(granted.key), 403, 'B refuses the publish whose grant was withdrawn');
  t.equal(await publishOnB(keyed.key), 401, 'B refuses the revoked key');
  t.match(await ocspOnB(), /leaf\.pem: revoked/, 'B\'s OCSP says revoked');
  // And A, which heard everything, agrees.
  const onA = async (key: string) => (await publish(a, ws, channel, key, [{ n: 'x', v: 1 }])).status;
  t.same([await onA(granted.key), await onA(keyed.key)], [403, 401], 'A answers the same');
});
