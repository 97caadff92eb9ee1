// Scenario: CA signatures (ECDSA P-256 over a 1 KiB to-be-signed blob) through the service's CA keys,
// in this process: node:crypto signing on this thread (the peer), one worker task per signature (what
// batching saves), the batched signer with encrypted_database keys, and the batched signer on a fresh
// SoftHSM2 token (SVC_PKI_PKCS11_MAX_IN_FLIGHT at its default 8, and raised to 64). Same run, same keys'
// algorithm; CPU is this process with its worker threads.
import { execFileSync } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../lib/paths.js';

const dist = (p) => import(pathToFileURL(join(repoRoot, 'dist', 'src', p)).href);
const IN_FLIGHT = 64;
const SOFTHSM = '/usr/lib/softhsm/libsofthsm2.so';

/** `callers` closed loops, each awaiting its signature before asking for the next. */
async function measure(ctx, label, call, { seconds, warmup, callers = IN_FLIGHT }) {
  const hist = ctx.createHistogram();
  let stop = performance.now() + warmup * 1000;
  let counting = false;
  let requests = 0;
  let errors = 0;
  const loop = async () => {
    while (performance.now() < stop) {
      const t0 = process.hrtime.bigint();
      try {
        await call();
      } catch {
        if (counting) errors++;
        continue;
      }
      if (counting) {
        hist.recordValue(Math.max(1, Number(process.hrtime.bigint() - t0) / 1000));
        requests++;
      }
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  counting = true;
  stop = performance.now() + seconds * 1000;
  const window = ctx.startCpuWindow();
  await Promise.all(Array.from({ length: callers }, loop));
  const { wallSeconds, cpuSeconds } = window.stop();
  const cpu = Object.values(cpuSeconds).reduce((a, b) => a + b, 0);
  const r = { signer: label, requests, wallSeconds, perSec: requests / wallSeconds, p50Us: hist.getValueAtPercentile(50), p99Us: hist.getValueAtPercentile(99), maxUs: hist.maxValue, errors, cpuSeconds, cpuUsPerSignature: (cpu / Math.max(1, requests)) * 1e6 };
  console.error(`bench: ca-sign ${label}: ${Math.round(r.perSec)}/s, p50 ${r.p50Us} µs, p99 ${r.p99Us} µs, ${r.cpuUsPerSignature.toFixed(1)} µs CPU/signature, ${errors} errors`);
  return r;
}

function softHsmToken() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-softhsm-'));
  mkdirSync(join(dir, 'tokens'));
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'bench', '--pin', '1234', '--so-pin', '87654321'], { env: { ...process.env, SOFTHSM2_CONF: conf }, stdio: 'pipe' });
  // SoftHSM reads it at its first C_Initialize in this process, from the real environment.
  process.env.SOFTHSM2_CONF = conf;
  return { dir, env: { SVC_PKI_PKCS11_MODULE_PATH: SOFTHSM, SVC_PKI_PKCS11_TOKEN_LABEL: 'bench', SVC_PKI_PKCS11_USER_PIN: '1234' } };
}

export default {
  name: 'ca-sign',
  description: `CA signatures, ECDSA P-256, ${IN_FLIGHT} in flight: node:crypto on one thread vs one worker task each vs the batched signer (encrypted_database, SoftHSM2)`,
  server: 'none',
  async run(ctx) {
    const [{ loadConfig }, { createLogger }, { createWorkerPool }, { caKeysWorkerData, createCaKeys }] = await Promise.all([
      dist('config.js'), dist('log.js'), dist('worker-pool.js'), dist('pki/keys/index.js'),
    ]);
    const token = softHsmToken();
    const env = { ...token.env, SVC_PKI_CA_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'), SVC_PKI_PKCS11_MAX_IN_FLIGHT: String(IN_FLIGHT) };
    const config = loadConfig(env);
    const data = { caKeys: caKeysWorkerData(config.pki) };
    const workers = createWorkerPool({ ...config.workers, workerData: data, keepThreads: true });
    const log = createLogger('warn');
    const caKeys = await createCaKeys({ workers, config: config.pki, log });
    // The service's defaults otherwise: the same pool, another CaKeys with SVC_PKI_PKCS11_MAX_IN_FLIGHT=8.
    const defaults = await createCaKeys({ workers, config: loadConfig({ ...env, SVC_PKI_PKCS11_MAX_IN_FLIGHT: '8' }).pki, log });
    const seconds = Math.min(5, ctx.durationSeconds);
    const warmup = Math.min(1, ctx.warmupSeconds);
    const tbs = randomBytes(1024);
    try {
      const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
      const local = createPrivateKey(privateKey.export({ type: 'pkcs8', format: 'pem' }));
      const encrypted = await caKeys.generate('encrypted_database', 'ecdsa-p256', 'bench');
      const onToken = await caKeys.generate('pkcs11', 'ecdsa-p256', 'bench');
      const single = { keys: [encrypted.ref], timeoutMs: 0, maxRetries: 0 };
      const results = {
        nodeCrypto: await measure(ctx, 'node:crypto, this thread', async () => sign('sha256', tbs, local), { seconds, warmup, callers: 1 }),
        taskPerSignature: await measure(ctx, 'encrypted_database, one task each', async () => {
          const out = await workers.run('caKeysSign', { ...single, items: [{ k: 0, data: new Uint8Array(tbs) }] });
          if (!out.ok || !out.results[0].ok) throw new Error('sign failed');
        }, { seconds, warmup }),
        encrypted: await measure(ctx, 'encrypted_database, batched', () => caKeys.sign(encrypted.ref, tbs), { seconds, warmup }),
        softhsm: await measure(ctx, `SoftHSM2, batched, max in flight ${IN_FLIGHT}`, () => caKeys.sign(onToken.ref, tbs), { seconds, warmup }),
        softhsmDefault: await measure(ctx, 'SoftHSM2, batched, max in flight 8 (default)', () => defaults.sign(onToken.ref, tbs), { seconds, warmup, callers: 8 }),
      };
      const batching = caKeys.describe();
      const ratios = {
        encryptedVsNodeCrypto: results.encrypted.perSec / results.nodeCrypto.perSec,
        encryptedVsTaskEach: results.encrypted.perSec / results.taskPerSignature.perSec,
        cpuEncryptedVsNodeCrypto: results.encrypted.cpuUsPerSignature / results.nodeCrypto.cpuUsPerSignature,
        softhsmVsNodeCrypto: results.softhsm.perSec / results.nodeCrypto.perSec,
      };
      console.log(`\nca-sign: ECDSA P-256 signatures of 1 KiB, same process, same run (${config.workers.threads} worker threads)`);
      for (const r of Object.values(results)) {
        console.log(`  ${r.signer.padEnd(46)} ${String(Math.round(r.perSec)).padStart(7)} /s  p50 ${String(r.p50Us).padStart(6)} µs  p99 ${String(r.p99Us).padStart(6)} µs  cpu ${r.cpuUsPerSignature.toFixed(1).padStart(6)} µs/signature  errors ${r.errors}`);
      }
      console.log(`  ratios: ${Object.entries(ratios).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
      const e = batching.encrypted_database;
      const p = batching.pkcs11;
      console.log(`  batch size: encrypted ${(e.signatures / e.sign_tasks).toFixed(1)}, SoftHSM2 ${(p.signatures / p.sign_tasks).toFixed(1)} signatures per task\n`);
      const main = results.encrypted;
      return {
        requests: main.requests, wallSeconds: main.wallSeconds, p50Us: main.p50Us, p99Us: main.p99Us, maxUs: main.maxUs,
        errors: main.errors, serverCpuSeconds: main.cpuSeconds, signers: results, ratios, batching,
      };
    } finally {
      await defaults.close();
      await caKeys.close();
      await workers.close();
      rmSync(token.dir, { recursive: true, force: true });
    }
  },
};
