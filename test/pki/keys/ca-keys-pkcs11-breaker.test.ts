// The PKCS#11 limits against a misbehaving module: a shim over SoftHSM2 (test/helpers/pkcs11-shim.c) that
// sleeps in or fails C_Sign on demand, loaded through SVC_PKI_PKCS11_MODULE_PATH like any module.
import { createPublicKey, verify } from 'node:crypto';
import t from 'tap';
import { isAppError } from '../../../src/errors.js';
import type { CaKeys, GeneratedKey } from '../../../src/pki/keys/index.js';
import { newKek, startCaKeys } from '../../helpers/ca-keys.js';
import { buildPkcs11Shim, CKR_DEVICE_ERROR, CKR_GENERAL_ERROR } from '../../helpers/pkcs11-shim.js';
import { createSoftHsmToken } from '../../helpers/softhsm.js';
import { waitUntil } from '../../helpers/wait.js';

const shim = buildPkcs11Shim(t);
const token = createSoftHsmToken(t, { modulePath: shim.modulePath });
const LIMITS = {
  SVC_PKI_PKCS11_OPERATION_TIMEOUT_MS: '300',
  SVC_PKI_PKCS11_MAX_RETRIES: '1',
  SVC_PKI_PKCS11_CIRCUIT_FAILURE_THRESHOLD: '3',
  SVC_PKI_PKCS11_CIRCUIT_RESET_SECS: '1',
};

async function failure(p: Promise<unknown>): Promise<{ kind: string; message: string }> {
  const err = await p.then(() => null, (e: unknown) => e);
  if (!isAppError(err)) throw new Error(`expected an AppError, got ${String(err)}`);
  return { kind: err.kind, message: err.message };
}

const circuit = (caKeys: CaKeys) => (caKeys.describe().pkcs11 as { circuit: string }).circuit;
const data = Buffer.from('tbs');
const verifies = (key: GeneratedKey, sig: Buffer) => verify('sha256', data, createPublicKey({ key: key.spki, format: 'der', type: 'spki' }), sig);

t.test('a slow module times out, opens the breaker after the threshold, fails fast while open, recovers after the reset', async (t) => {
  shim.set('pass');
  const { caKeys, workers } = await startCaKeys(t, { ...token.env, ...LIMITS }, 1);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'slow');
  t.ok(verifies(key, await caKeys.sign(key.ref, data)), 'signs while the module is well');

  shim.set('sleep 1500');
  for (let i = 1; i <= 3; i++) {
    const f = await failure(caKeys.sign(key.ref, data));
    t.equal(f.kind, 'UNAVAILABLE');
    t.match(f.message, /did not answer within 300 ms \(SVC_PKI_PKCS11_OPERATION_TIMEOUT_MS\)/, `timeout ${i}`);
    t.equal(circuit(caKeys), i < 3 ? 'closed' : 'open', `after ${i} failures the circuit is ${i < 3 ? 'closed' : 'open'}`);
  }
  t.match(caKeys.describe(), { status: 'degraded', pkcs11: { circuit: 'open', consecutive_failures: 3 } });

  const tasks = workers.stats.completed;
  const calls = shim.calls();
  const started = performance.now();
  const fast = await failure(caKeys.sign(key.ref, data));
  t.equal(fast.kind, 'UNAVAILABLE');
  t.match(fast.message, /circuit breaker open after 3 consecutive failures; next attempt in 1 s/);
  t.ok(performance.now() - started < 100, 'answered at once');
  t.equal(workers.stats.completed, tasks, 'no worker task ran');
  t.equal(shim.calls(), calls, 'the module was not called');
  t.match((await failure(caKeys.generate('pkcs11', 'ecdsa-p256', 'x'))).message, /circuit breaker open/, 'generation is refused too');

  // After the reset time one trial goes through; the module is well again, so the circuit closes.
  shim.set('pass');
  let sig: Buffer | null = null;
  await waitUntil(async () => {
    sig = await caKeys.sign(key.ref, data).catch(() => null);
    return sig !== null;
  }, 10_000, 'a successful trial after the reset time');
  t.ok(sig && verifies(key, sig), 'the trial signed');
  t.equal(circuit(caKeys), 'closed');
  t.match(caKeys.describe(), { status: 'ok', pkcs11: { consecutive_failures: 0 } });
});

t.test('a token call that hangs costs its worker thread, not the pool: other signing goes on', async (t) => {
  shim.set('pass');
  const { caKeys } = await startCaKeys(t, { ...token.env, ...LIMITS, SVC_PKI_CA_KEY_ENCRYPTION_KEY: newKek() }, 1);
  const onToken = await caKeys.generate('pkcs11', 'ecdsa-p256', 'hangs');
  const inDb = await caKeys.generate('encrypted_database', 'ecdsa-p256', 'goes on');
  shim.set('sleep 8000');
  const calls = shim.calls();
  const slept = shim.slept();
  const hung = failure(caKeys.sign(onToken.ref, data));
  await waitUntil(() => shim.calls() > calls, 10_000, 'the slow call to begin');
  // The only worker thread is inside C_Sign; the watchdog replaces it and the encrypted key signs meanwhile.
  t.ok(verifies(inDb, await caKeys.sign(inDb.ref, data)), 'an encrypted_database signature');
  t.equal(shim.slept(), slept, 'while the token call still hangs');
  t.match((await hung).message, /did not answer within 300 ms/);
  shim.set('pass');
  t.ok(verifies(onToken, await caKeys.sign(onToken.ref, data)), 'the replacement thread signs on the token');
});

t.test('a failed trial reopens the breaker; while the trial is out other calls are refused', async (t) => {
  shim.set('pass');
  const { caKeys } = await startCaKeys(t, { ...token.env, ...LIMITS, SVC_PKI_PKCS11_CIRCUIT_FAILURE_THRESHOLD: '1' }, 1);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'trial');
  shim.set('sleep 1000');
  await failure(caKeys.sign(key.ref, data));
  t.equal(circuit(caKeys), 'open', 'one failure opens it at threshold 1');
  // Poll with calls that are refused at once until one is admitted as the trial (the reset has passed).
  let trial: Promise<unknown> | null = null;
  await waitUntil(async () => {
    const p = caKeys.sign(key.ref, data);
    const early = await Promise.race([p.then(() => 'done', (e: Error) => (/circuit breaker open/.test(e.message) ? 'refused' : 'done')), new Promise((r) => setTimeout(() => r('running'), 50))]);
    if (early === 'running') trial = p;
    return early === 'running';
  }, 10_000, 'the trial to be admitted');
  t.equal(circuit(caKeys), 'half_open');
  t.match((await failure(caKeys.sign(key.ref, data))).message, /half-open, a trial operation is in progress/);
  const f = await failure(trial as unknown as Promise<unknown>);
  t.match(f.message, /did not answer within 300 ms/, 'the trial timed out');
  t.equal(circuit(caKeys), 'open', 'and the circuit is open again');
  shim.set('pass');
});

t.test('a failing module: transient errors are retried, permanent ones are not, and failures open the breaker', async (t) => {
  shim.set('pass');
  const { caKeys } = await startCaKeys(t, { ...token.env, ...LIMITS }, 1);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'failing');

  // Every other C_Sign fails with CKR_DEVICE_ERROR: one retry (SVC_PKI_PKCS11_MAX_RETRIES=1) hides it.
  shim.set(`flaky ${CKR_DEVICE_ERROR}`);
  let calls = shim.calls();
  for (let i = 0; i < 4; i++) t.ok(verifies(key, await caKeys.sign(key.ref, data)), `flaky sign ${i} succeeded`);
  t.ok(shim.calls() - calls >= 7, `retried: ${shim.calls() - calls} calls for 4 signatures`);
  t.equal(circuit(caKeys), 'closed');

  // Always CKR_DEVICE_ERROR: tried 1 + 1 times, then a failure the breaker counts.
  shim.set(`fail ${CKR_DEVICE_ERROR}`);
  calls = shim.calls();
  const f = await failure(caKeys.sign(key.ref, data));
  t.equal(f.kind, 'UNAVAILABLE');
  t.match(f.message, /failed after 2 attempts: CKR_DEVICE_ERROR/);
  t.equal(shim.calls() - calls, 2, 'one attempt and one retry');

  // CKR_GENERAL_ERROR is not transient: one attempt.
  shim.set(`fail ${CKR_GENERAL_ERROR}`);
  calls = shim.calls();
  t.match((await failure(caKeys.sign(key.ref, data))).message, /failed: CKR_GENERAL_ERROR/);
  t.equal(shim.calls() - calls, 1, 'not retried');
  t.equal(circuit(caKeys), 'closed', 'two consecutive failures: still closed');
  await failure(caKeys.sign(key.ref, data));
  t.equal(circuit(caKeys), 'open', 'the third opens it');

  shim.set('pass');
  await waitUntil(async () => (await caKeys.sign(key.ref, data).catch(() => null)) !== null, 10_000, 'recovery');
  t.equal(circuit(caKeys), 'closed', 'recovered once the module is well');
});

t.test('beyond SVC_PKI_PKCS11_MAX_IN_FLIGHT operations are refused with RATE_LIMITED; those admitted complete', async (t) => {
  shim.set('pass');
  const { caKeys } = await startCaKeys(t, { ...token.env, ...LIMITS, SVC_PKI_PKCS11_OPERATION_TIMEOUT_MS: '5000', SVC_PKI_PKCS11_MAX_IN_FLIGHT: '4' }, 2);
  const key = await caKeys.generate('pkcs11', 'ecdsa-p256', 'in flight');
  shim.set('sleep 100');
  const results = await Promise.allSettled(Array.from({ length: 7 }, () => caKeys.sign(key.ref, data)));
  const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as Error);
  t.equal(refused.length, 3, 'three of seven refused');
  for (const err of refused) {
    t.ok(isAppError(err) && err.kind === 'RATE_LIMITED' && err.retryAfterSeconds === 1);
    t.match(err.message, /too many PKCS#11 operations in flight \(SVC_PKI_PKCS11_MAX_IN_FLIGHT=4\)/);
  }
  t.ok(results.filter((r) => r.status === 'fulfilled').every((r) => verifies(key, (r as PromiseFulfilledResult<Buffer>).value)), 'four signed');
  t.equal((caKeys.describe().pkcs11 as { in_flight: number }).in_flight, 0, 'slots returned');
  t.equal(circuit(caKeys), 'closed', 'refusals do not count against the token');
  shim.set('pass');
});
