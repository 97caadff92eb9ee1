// Scenario: CRL generation with 100,000 revoked entries, the service's path (src/pki/publication/crl.ts: ledger
// position check, per-issuer lock, the stored entries concatenated by PostgreSQL, TBS envelope, one
// signature in a worker with an encrypted_database key, the signed DER stored) against `openssl ca
// -gencrl` over an index.txt of the same 100,000 serials, reasons and times, same issuer key (P-256).
// Each round first adds one revocation, so the CRL must be re-signed. Both CRLs are read back by `openssl
// crl` and must list 100,000+ entries. Target: at most a quarter of OpenSSL's time.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { createBenchDatabase } from '../lib/authz-dataset.js';
import { repoRoot } from '../lib/paths.js';

const dist = (p) => import(pathToFileURL(join(repoRoot, 'dist', 'src', p)).href);
const ENTRIES = 100_000;
const ROUNDS = 3;
const REASONS = ['unspecified', 'key_compromise', 'superseded', 'cessation_of_operation'];
const OPENSSL_REASONS = { unspecified: 'unspecified', key_compromise: 'keyCompromise', superseded: 'superseded', cessation_of_operation: 'cessationOfOperation' };

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function opensslTime(d) {
  const z = d.toISOString().replace(/[-:T]/g, '').slice(2, 14);
  return `${z}Z`;
}

export default {
  name: 'pki-crl-100k',
  description: `CRL of ${ENTRIES.toLocaleString('en')} revoked entries: the service's generation (stored entries + one signature) vs openssl ca -gencrl`,
  server: 'none',
  async run(ctx) {
    const [{ loadConfig }, { createLogger }, { createWorkerPool }, { caKeysWorkerData, createCaKeys }, { migrate }, der, info, { createCrls }, { createPublicationCoherence }, { migrationsDir }] = await Promise.all([
      dist('config.js'), dist('log.js'), dist('worker-pool.js'), dist('pki/keys/index.js'), dist('db/migrate.js'), dist('pki/x509/der.js'),
      dist('pki/issuance/certificate-info.js'), dist('pki/publication/crl.js'), dist('pki/publication/publication-coherence.js'), dist('paths.js'),
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'bench-crl-'));
    const f = (n) => join(dir, n);
    const ssl = (args) => execFileSync('openssl', args, { stdio: 'pipe', maxBuffer: 256 * 1024 * 1024 });
    ssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=bench CRL issuer', '-days', '3650',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-addext', 'subjectKeyIdentifier=hash']);
    const db = await createBenchDatabase();
    const log = createLogger('warn');
    const sql = postgres(db.url, { max: 4, onnotice: () => {} });
    const env = { SVC_PKI_CA_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
    const config = loadConfig(env);
    const workers = createWorkerPool({ ...config.workers, workerData: { caKeys: caKeysWorkerData(config.pki) } });
    const caKeys = await createCaKeys({ workers, config: config.pki, log });
    try {
      await migrate(sql, migrationsDir, log);
      const key = await caKeys.importPrivateKey(readFileSync(f('ca.key'), 'utf8'));
      const cert = info.readCertificate(der.pemBlocks(readFileSync(f('ca.pem'), 'utf8'), ['CERTIFICATE'])[0], 'bench issuer');
      const issuerId = randomUUID();
      const issuer = {
        id: issuerId, keyRef: key.ref, signatureAlgorithm: der.signatureAlgorithmDer('ecdsa-p256'), issuerName: cert.subjectNameDer, subjectKeyId: cert.subjectKeyId,
      };
      // The same entries for both: serial, time, reason; the service's rows carry their CRL entry DER.
      const base = Date.now() - 86_400_000;
      let index = '';
      let seq = 0;
      const rowOf = () => {
        const serial = der.randomSerial().toString('hex');
        const at = new Date(Math.floor((base + seq * 100) / 1000) * 1000);
        const reason = REASONS[seq++ % REASONS.length];
        const notAfter = new Date(Date.now() + 365 * 86_400_000);
        index += `R\t${opensslTime(notAfter)}\t${opensslTime(at)}${reason === 'unspecified' ? '' : `,${OPENSSL_REASONS[reason]}`}\t${serial.toUpperCase()}\tunknown\t/CN=d${seq}\n`;
        return { issuer_id: issuerId, serial_number: serial, reason, revoked_at: at, not_after: notAfter, crl_entry: der.crlEntryDer(serial, at, reason) };
      };
      console.error(`bench: pki-crl-100k: seeding ${ENTRIES} ledger rows`);
      for (let i = 0; i < ENTRIES; i += 5000) {
        const rows = Array.from({ length: Math.min(5000, ENTRIES - i) }, rowOf);
        await sql`insert into certificate_revocations ${sql(rows)}`;
      }
      await sql`analyze certificate_revocations`;

      const coherence = createPublicationCoherence({ subscribe() {}, onReconnect() {} });
      const crls = createCrls({ sql, keys: caKeys, issuers: { get: async () => issuer }, coherence, log, validitySecs: 86_400 });
      writeFileSync(f('crlnumber'), '01\n');
      writeFileSync(f('ca.cnf'), `[ca]\ndefault_ca = bench\n[bench]\ndatabase = ${f('index.txt')}\ncrlnumber = ${f('crlnumber')}\ndefault_md = sha256\ndefault_crl_days = 1\ncrl_extensions = crl_ext\n[crl_ext]\nauthorityKeyIdentifier = keyid\n`);

      const ours = [];
      const theirs = [];
      const hist = ctx.createHistogram();
      let oursCpu = 0;
      let crl;
      for (let round = 0; round < ROUNDS; round++) {
        // A revocation: the CRL must be re-signed.
        await sql`insert into certificate_revocations ${sql([rowOf()])}`;
        coherence.committed([issuerId]);
        writeFileSync(f('index.txt'), index);
        const window = ctx.startCpuWindow();
        const t0 = performance.now();
        crl = await crls.get(issuerId);
        const ms = performance.now() - t0;
        const cpu = window.stop();
        oursCpu += Object.values(cpu.cpuSeconds).reduce((a, b) => a + b, 0);
        ours.push(ms);
        hist.recordValue(Math.round(ms * 1000));
        const o0 = performance.now();
        const r = spawnSync('openssl', ['ca', '-gencrl', '-config', f('ca.cnf'), '-keyfile', f('ca.key'), '-cert', f('ca.pem'), '-out', f('openssl.crl')], { stdio: 'pipe' });
        if (r.status !== 0) throw new Error(`openssl ca -gencrl failed: ${r.stderr}`);
        theirs.push(performance.now() - o0);
        console.error(`bench: pki-crl-100k round ${round + 1}: service ${ms.toFixed(0)} ms (${crl.entries} entries, ${(crl.der.length / 1e6).toFixed(1)} MB, number ${crl.crlNumber}), openssl ca -gencrl ${theirs[round].toFixed(0)} ms`);
      }
      writeFileSync(f('ours.crl'), crl.der);
      const count = (args) => (ssl(['crl', ...args, '-noout', '-text']).toString().match(/Serial Number:/g) ?? []).length;
      const oursListed = count(['-inform', 'DER', '-in', f('ours.crl'), '-CAfile', f('ca.pem')]);
      const theirsListed = count(['-in', f('openssl.crl')]);
      const verify = ssl(['crl', '-inform', 'DER', '-in', f('ours.crl'), '-CAfile', f('ca.pem'), '-noout']).toString() + '';
      const ratio = median(ours) / median(theirs);
      console.error(`bench: pki-crl-100k: median service ${median(ours).toFixed(0)} ms vs openssl ${median(theirs).toFixed(0)} ms = ${ratio.toFixed(3)} (target <= 0.25); openssl crl lists ${oursListed} (ours) / ${theirsListed} (openssl's) ${verify.trim()}`);
      return {
        requests: ROUNDS, wallSeconds: ours.reduce((a, b) => a + b, 0) / 1000, p50Us: hist.getValueAtPercentile(50), p99Us: hist.getValueAtPercentile(99), maxUs: hist.maxValue,
        errors: oursListed === ENTRIES + ROUNDS ? 0 : 1, serverCpuSeconds: oursCpu,
        serviceMs: ours, opensslMs: theirs, ratioToOpenssl: ratio, targetRatio: 0.25, met: ratio <= 0.25, entriesListed: oursListed, opensslEntriesListed: theirsListed,
      };
    } finally {
      await caKeys.close();
      await workers.close();
      await sql.end();
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
