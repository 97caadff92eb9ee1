// The resolution cache on its own, with the database, the hub and the revocation service replaced by
// recorders (what the end-to-end tests cannot pin down, since there a NOTIFY may arrive first): the
// revoking instance drops an entry by its local hook alone, a pki.revoked notice drops only what it names,
// {all: true} and a reconnect clear everything, unknown answers are not kept, a lookup that raced a
// revocation is not stored, and an answer cached as active reads as expired once its time has passed.
import t from 'tap';
import type { Principal } from '../../src/auth/index.js';
import type { NotifyHandler, NotifyHub } from '../../src/db/notify-hub.js';
import { REVOKED_TOPIC, type RevokedNotice, type ResolvedCertificate } from '../../src/pki/index.js';
import { createCertificateResolution } from '../../src/pki/resolution/resolution.js';

const TENANT = '11111111-1111-4111-8111-111111111111';
const caller = { entityId: '22222222-2222-4222-8222-222222222222', tenantId: null, homeTenantId: TENANT, scoped: false } as unknown as Principal;

function world() {
  const rows = new Map<string, ResolvedCertificate>();
  let loads = 0;
  let gate: Promise<void> | null = null;
  const topics = new Map<string, NotifyHandler>();
  let reconnect = () => {};
  let revokedHere: (n: RevokedNotice) => void = () => {};
  const hub = {
    subscribe: (topic: string, h: NotifyHandler) => (topics.set(topic, h), () => topics.delete(topic)),
    onReconnect: (h: () => void) => ((reconnect = h), () => {}),
  } as unknown as NotifyHub;
  const certificates = {
    async byFingerprint(fp: string) {
      loads++;
      if (gate) await gate;
      const row = rows.get(fp);
      return row ? { ...row } : null;
    },
  };
  const revocation = { onRevoked: (h: (n: RevokedNotice) => void) => ((revokedHere = h), () => {}) };
  const resolution = createCertificateResolution({
    sql: null as never, hub, certificates: certificates as never, revocation: revocation as never, admit: () => {}, settings: { max: 100, ttlSecs: 300 },
  });
  const add = (fp: string, serial: string, expiresIn = 3_600_000) => {
    rows.set(fp, {
      credentialId: `c-${serial}`, entityId: 'e', tenantId: TENANT, issuerId: 'issuer', serialNumber: serial, fingerprintSha256: fp, identityUri: null,
      status: 'active', notBefore: null, expiresAt: new Date(Date.now() + expiresIn), revokedAt: null, revocationReason: null,
    });
  };
  const revokeInDb = (fp: string) => Object.assign(rows.get(fp) as ResolvedCertificate, { status: 'revoked' });
  const resolve = (fp: string) => resolution.resolve(caller, { certificateDer: Buffer.alloc(0), fingerprintSha256: fp, issuerFingerprintSha256: '', serialNumber: '', expectedTenantId: '' });
  return {
    resolution, add, revokeInDb, resolve, rows,
    get loads() { return loads; },
    hold() { let release = () => {}; gate = new Promise((r) => (release = r)); return () => { gate = null; release(); }; },
    notify: (n: unknown) => topics.get(REVOKED_TOPIC)?.(n),
    reconnect: () => reconnect(),
    revokedHere: (n: RevokedNotice) => revokedHere(n),
  };
}

const fp = (c: string) => c.repeat(64);

t.test('cached, and dropped by the local revocation hook alone', async (t) => {
  const w = world();
  w.add(fp('a'), '0a');
  t.equal((await w.resolve(fp('a'))).status, 'active');
  t.equal((await w.resolve(fp('a'))).status, 'active');
  t.equal(w.loads, 1, 'the second answer came from the cache');
  w.revokeInDb(fp('a'));
  t.equal((await w.resolve(fp('a'))).status, 'active', 'stale until told');
  w.revokedHere({ revoked: [{ issuerId: 'issuer', serialNumber: '0a' }] });
  t.equal((await w.resolve(fp('a'))).status, 'revoked', 'the revoking instance\'s hook dropped it, no NOTIFY needed');
});

t.test('a pki.revoked notice drops what it names; all and reconnect clear everything', async (t) => {
  const w = world();
  for (const c of ['a', 'b', 'c']) w.add(fp(c), `0${c}`);
  for (const c of ['a', 'b', 'c']) await w.resolve(fp(c));
  t.equal(w.resolution.size, 3);
  w.notify({ revoked: [{ issuerId: 'issuer', serialNumber: '0b' }] });
  t.equal(w.resolution.size, 2, 'only the named serial');
  w.notify({ revoked: [{ issuerId: 'other-issuer', serialNumber: '0a' }] });
  t.equal(w.resolution.size, 2, 'the same serial of another issuer is not it');
  w.notify({ all: true });
  t.equal(w.resolution.size, 0, '{all: true} clears');
  for (const c of ['a', 'b']) await w.resolve(fp(c));
  w.reconnect();
  t.equal(w.resolution.size, 0, 'a LISTEN reconnect clears');
  w.notify(null);
  t.equal(w.resolution.size, 0, 'a malformed notice clears rather than being ignored');
});

t.test('unknown answers are not kept; a lookup that raced a revocation is not stored', async (t) => {
  const w = world();
  await t.rejects(w.resolve(fp('d')), { message: 'certificate not found' });
  w.add(fp('d'), '0d');
  t.equal((await w.resolve(fp('d'))).status, 'active', 'issued a moment later: found at once');

  w.add(fp('e'), '0e');
  const release = w.hold();
  const racing = w.resolve(fp('e'));
  w.notify({ revoked: [{ issuerId: 'issuer', serialNumber: '0e' }] });
  release();
  await racing;
  t.equal(w.resolution.size, 1, 'the answer read before the revocation was not cached');
});

t.test('an answer cached as active reads as expired once its time has passed', async (t) => {
  const w = world();
  w.add(fp('f'), '0f', 150);
  t.equal((await w.resolve(fp('f'))).status, 'active');
  await new Promise((r) => setTimeout(r, 200));
  t.equal((await w.resolve(fp('f'))).status, 'expired');
  t.equal(w.loads, 1, 'from the cache, aged at answer time');
});
