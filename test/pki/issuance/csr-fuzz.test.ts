// Hostile CSRs: valid requests made by `openssl req` (several key types, with and without an
// extensionRequest) mutated byte by byte. Every outcome is either a verified request or a refusal of
// kind INVALID_INPUT naming the problem, never another error (which the service would answer as INTERNAL).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { isAppError } from '../../../src/errors.js';
import { readCsr, readCsrDer } from '../../../src/pki/issuance/csr.js';
import { FUZZ_SEED, generator } from '../../helpers/fuzz.js';
import { opensslCsr, type CsrKey } from '../../helpers/pki.js';

const dir = mkdtempSync(path.join(tmpdir(), 'csr-fuzz-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const toDer = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');

t.test(`mutated CSRs are refused cleanly (FUZZ_SEED=${FUZZ_SEED})`, async (t) => {
  const g = generator(FUZZ_SEED);
  const seeds: Buffer[] = [];
  for (const key of ['ec:P-256', 'ec:P-384', 'rsa:2048', 'ed25519'] as CsrKey[]) {
    seeds.push(toDer(opensslCsr(dir, { key }).csrPem));
    seeds.push(toDer(opensslCsr(dir, { key, addext: ['subjectAltName=DNS:a.example.com,IP:10.0.0.1', 'basicConstraints=critical,CA:TRUE'] }).csrPem));
  }
  for (const seed of seeds) t.ok(readCsrDer(seed).keyAlgorithm, 'the unmutated request verifies');
  let refused = 0;
  let unexpected = 0;
  for (let i = 0; i < 3000; i++) {
    const input = g.mutate(g.pick(seeds), 4);
    try {
      readCsrDer(input);
    } catch (err) {
      if (isAppError(err) && err.kind === 'INVALID_INPUT') refused++;
      else if (unexpected++ < 5) t.fail(`unexpected ${String(err)} for ${input.toString('base64')}`);
    }
  }
  t.equal(unexpected, 0, 'no mutation escapes as anything but INVALID_INPUT');
  t.ok(refused > 2500, `most mutations are refused (${refused})`);
  for (const junk of ['', 'x', '-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----', `-----BEGIN CERTIFICATE REQUEST-----\n${'A'.repeat(400)}\n-----END CERTIFICATE REQUEST-----`, 42, null]) {
    let kind: string | undefined;
    try {
      readCsr(junk, 65536);
    } catch (err) {
      kind = isAppError(err) ? err.kind : String(err);
    }
    t.equal(kind, 'INVALID_INPUT', `refused: ${JSON.stringify(junk)?.slice(0, 40)}`);
  }
});
