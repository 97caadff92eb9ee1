// Two instances on one database: a revocation made on A is answered as revoked by B's OCSP responder and
// CRL once B has heard A's NOTIFY (the test waits for that notification, not for a time), though B had
// the good answer cached; a lost LISTEN connection drops B's caches when it comes back. Clients that
// connect and leave without a request, or send half of one, cost nothing and block no one.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import t, { type Test } from 'tap';
import { REVOKED_TOPIC } from '../../../src/pki/index.js';
import { AUTH_ENV, adminToken, startAuthService } from '../../helpers/auth.js';
import { createEntity, createTenant } from '../../helpers/management.js';
import { makeCaFiles } from '../../helpers/pki.js';
import { firstPem, issueLeaf, opensslOcsp, revokeLeaf, sh, tempDir } from '../../helpers/publication.js';
import { startTestService } from '../../helpers/service.js';
import { waitUntil } from '../../helpers/wait.js';

t.test('revocation on one instance, OCSP and CRL on another', async (t) => {
  const ca = makeCaFiles(t);
  const env = { ...ca.env, SVC_PKI_PUBLICATION_ADDR: '127.0.0.1:0' };
  const a = await startAuthService(t, env);
  // B's publication listener runs on its own thread: what that thread keeps must follow A's revocations
  // (through B's NOTIFY) and B's lost LISTEN connection like B's own caches.
  const b = await startTestService(t, { ...AUTH_ENV, ...env, SVC_PKI_PUBLICATION_THREAD: 'true' }, a.db);
  const admin = await adminToken(a);
  const tenantId = await createTenant(a, admin, 'shared');
  const device = await createEntity(a, admin, { kind: 'device', name: 'd', tenantId });
  const file = tempDir(t);
  const leaf = await issueLeaf(a, admin, ca.dir, device);
  const issuer = file('issuer.pem', firstPem(leaf.chainPem));
  const leafFile = file('leaf.pem', leaf.certificatePem);
  const onB = (extra: string[] = []) => opensslOcsp(b.url('pki_publication'), leaf.issuerId, { issuer, cafile: ca.root, cert: leafFile }, extra);
  const crlOnB = async () => {
    const der = Buffer.from(await (await fetch(`${b.url()}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
    return sh('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-CAfile', issuer], { input: der });
  };
  const ocspB = b.service.pki.publishing.ocsp.stats;

  // B signs and caches the good answer (and its CRL without the serial).
  t.match(await onB(['-no_nonce']), /leaf\.pem: good/);
  const signed = ocspB.signed;
  t.match(await onB(['-no_nonce']), /leaf\.pem: good/);
  t.equal(ocspB.signed, signed, 'the second answer came from B\'s cache');
  t.notMatch(await crlOnB(), new RegExp(leaf.serialNumber.toUpperCase()));

  const heard: string[] = [];
  b.service.hub.subscribe(REVOKED_TOPIC, (p) => heard.push(...((p as { revoked?: { serialNumber: string }[] }).revoked ?? []).map((r) => r.serialNumber)));
  await revokeLeaf(a, admin, leaf, 'affiliation_changed');
  await waitUntil(() => heard.includes(leaf.serialNumber), 5000, 'instance B hears the revocation');
  for (const extra of [['-no_nonce'], []]) {
    const out = await onB(extra);
    t.match(out, /leaf\.pem: revoked/, `B answers revoked ${extra.join(' ')}`);
    t.match(out, /Reason: affiliationChanged/);
  }
  const crl = await crlOnB();
  t.match(crl, new RegExp(`Serial Number: ${leaf.serialNumber.toUpperCase()}`), 'B\'s CRL lists it');
  t.match(crl, /Affiliation Changed/);
  const crlOf = async (ts: typeof a) => Buffer.from(await (await fetch(`${ts.url()}/certs/issuers/${leaf.issuerId}/crl`)).arrayBuffer());
  t.same(await crlOf(a), await crlOf(b), 'A serves the very CRL B signed (rebuilt from the stored signature, not re-signed)');

  /** A new leaf issued on `on`, its plain OCSP answer on B's listener asked twice: signed once, then kept. */
  const keptOnB = async (t: Test, on: typeof a, name: string) => {
    const issued = await issueLeaf(on, admin, ca.dir, device);
    const cert = file(`${name}.pem`, issued.certificatePem);
    const ask = () => opensslOcsp(b.url('pki_publication'), issued.issuerId, { issuer, cafile: ca.root, cert }, ['-no_nonce']);
    t.match(await ask(), new RegExp(`${name}\\.pem: good`));
    const before = ocspB.signed;
    t.match(await ask(), new RegExp(`${name}\\.pem: good`));
    t.equal(ocspB.signed, before, 'kept');
    return { issued, ask, before };
  };

  await t.test('a lost LISTEN connection drops B\'s caches when it comes back', async (t) => {
    const { ask, before } = await keptOnB(t, a, 'other');
    const drops = b.service.pki.publishing.coherence.stats.dropsAll;
    const reconnects = b.service.hub.reconnects;
    await a.service.sql`select pg_terminate_backend(${b.service.hub.backendPid as number})`;
    await waitUntil(() => b.service.hub.reconnects > reconnects, 10_000, 'B reconnects its LISTEN connection');
    t.ok(b.service.pki.publishing.coherence.stats.dropsAll > drops, 'caches dropped on reconnect');
    t.match(await ask(), /other\.pem: good/);
    t.equal(ocspB.signed, before + 1, 'the answer was signed afresh');
  });

  await t.test("a revocation on B itself retires what B's thread keeps before the call returns", async (t) => {
    const { issued, ask } = await keptOnB(t, b, 'third');
    await revokeLeaf(b, admin, issued, 'key_compromise');
    t.match(await ask(), /third\.pem: revoked/, 'revoked on the very next request');
  });

  await t.test('idle and half-sent connections cost nothing; others are answered', async (t) => {
    const req = file('req.der');
    await sh('openssl', ['ocsp', '-issuer', issuer, '-cert', leafFile, '-no_nonce', '-reqout', req]);
    const body = readFileSync(req);
    for (const [name, port] of [['management (uWS)', b.service.ports.http], ['publication (node:http)', b.service.ports.pki_publication]] as const) {
      const sockets: net.Socket[] = [];
      const open = (data?: string | Buffer) => new Promise<void>((resolve) => {
        const s = net.connect(port as number, '127.0.0.1', () => {
          if (data) s.write(data);
          resolve();
        });
        s.on('error', () => undefined);
        sockets.push(s);
      });
      // 20 that connect and say nothing, 20 that close at once, 20 with half a request (headers or body cut).
      for (let i = 0; i < 20; i++) await open();
      for (let i = 0; i < 20; i++) await open().then(() => sockets[sockets.length - 1]!.destroy());
      const path = `/certs/issuers/${leaf.issuerId}/ocsp`;
      for (let i = 0; i < 10; i++) await open(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Len`);
      for (let i = 0; i < 10; i++) {
        await open(Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`), body.subarray(0, 10)]));
      }
      const started = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/ocsp-request' } });
      t.equal(res.status, 200, `${name}: answered while 60 connections hang`);
      t.equal(res.headers.get('content-type'), 'application/ocsp-response');
      t.ok(performance.now() - started < 2000, `${name}: promptly`);
      for (const s of sockets) s.destroy();
    }
    t.match(await onB(['-no_nonce']), /leaf\.pem: revoked/, 'and openssl still gets its answer');
  });
});
