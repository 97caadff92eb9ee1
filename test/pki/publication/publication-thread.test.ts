// The publication listener on its own thread (publication-thread.ts), with stub answers and the real
// coherence: OCSP answers the main thread marks reusable are served by the thread alone until any change
// of the coherence (a revocation, here or on another instance) moves the shared generation, after which
// the very next request is answered afresh; nonce requests and everything else always ask the main thread;
// errors keep their status; the thread's own public_routes limit; a thread that dies is started again on
// its port; close frees the port. End to end (openssl ocsp on the default configuration, revocations seen
// at once) is publication-default.test.ts and chain-revocation.test.ts.
import t from 'tap';
import { AppError } from '../../../src/errors.js';
import type { RateLimitConfig } from '../../../src/http/rate-limit.js';
import type { HttpReply } from '../../../src/http/types.js';
import { createLogger } from '../../../src/log.js';
import { createPublicationCoherence } from '../../../src/pki/publication/publication-coherence.js';
import type { PublicationHandlers, ReusableReply } from '../../../src/pki/publication/publication-routes.js';
import { createPublicationThread } from '../../../src/pki/publication/publication-thread.js';
import type { NotifyHub } from '../../../src/db/notify-hub.js';
import { rawExchange } from '../../helpers/publication.js';
import { waitUntil } from '../../helpers/wait.js';

const ISSUER = '11111111-2222-4333-8444-555555555555';
const OCSP = { 'content-type': 'application/ocsp-response', 'cache-control': 'no-store' };
const NONCE_EXT = Buffer.from('300f06092b06010505073001020402abcd', 'hex');

/** One HTTP/1.0 exchange as openssl makes it: the request, then read until the server closes. */
const exchange = (port: number, request: (string | Buffer)[]) => rawExchange(port, request);
const post = (path: string, body: Buffer) =>
  [`POST ${path} HTTP/1.0\r\nHost: x\r\nContent-Type: application/ocsp-request\r\nContent-Length: ${body.length}\r\n\r\n`, body];
const get = (path: string) => [`GET ${path} HTTP/1.0\r\nHost: x\r\n\r\n`];

/** A hub that delivers nothing: the coherence is moved by the test itself (pending/committed, dropAll). */
const quietHub = { subscribe: () => () => undefined, onReconnect: () => undefined } as unknown as NotifyHub;
const noLimits = (publicRoutesMax?: number): RateLimitConfig => ({
  enabled: publicRoutesMax !== undefined, ipv6PrefixLen: 64, trustedProxyCidrs: [],
  policies: { public_routes: { max: publicRoutesMax ?? 1, windowSecs: 60 } },
});

function stubHandlers() {
  const state = { answer: 'good', reusableSecs: 300, crashNext: false };
  const calls: string[] = [];
  const reusable = (reply: HttpReply): ReusableReply => ({ reply, reusableSecs: state.reusableSecs });
  const handlers = {
    trustBundle: async () => (calls.push('trustBundle'), { status: 200, headers: { 'content-type': 'application/pem-certificate-chain' }, body: 'PEM' }),
    issuerCertificate: async (id: string) => (calls.push(`ca:${id}`), { status: 200, headers: { 'content-type': 'application/pkix-cert' }, body: new Uint8Array([1, 2, 3]) }),
    crl: async () => {
      calls.push('crl');
      throw new AppError('UNAVAILABLE', 'no CRL now', { retryAfterSeconds: 2 });
    },
    ocspPostReusable: (_id: string, body: Buffer) => {
      calls.push(`post:${body.toString('hex')}`);
      if (state.crashNext) {
        state.crashNext = false;
        // A body the listener cannot write: its thread fails on it (a fault in the thread, not the main one).
        return reusable({ status: 200, headers: OCSP, body: 42 as unknown as string });
      }
      return reusable({ status: 200, headers: OCSP, body: Buffer.from(`${state.answer}:${body.toString('hex')}`) });
    },
    ocspGetReusable: async (_id: string, path: string) => {
      calls.push(`get:${path}`);
      if (path.endsWith('/boom')) throw new Error('a bug');
      return reusable({ status: 200, headers: OCSP, body: Buffer.from(state.answer) });
    },
  } as unknown as PublicationHandlers;
  return { handlers, state, calls };
}

t.test('OCSP answers kept by the thread until the coherence moves; everything else asks the main thread', async (t) => {
  const coherence = createPublicationCoherence(quietHub);
  const { handlers, state, calls } = stubHandlers();
  const logged: string[] = [];
  const thread = createPublicationThread({ handlers, coherence, rateLimits: noLimits(), log: createLogger('error', (line) => void logged.push(line)) });
  const port = await thread.listen('127.0.0.1', 0);
  t.teardown(() => thread.close());
  const path = `/certs/issuers/${ISSUER}/ocsp`;
  const request = Buffer.from('3003020101', 'hex');

  const first = await exchange(port, post(path, request));
  t.equal(first.status, 200);
  t.equal(first.body.toString(), 'good:3003020101');
  t.equal(first.headers['content-length'], String(first.body.length));
  t.equal(thread.stats.asked, 1, 'the first asks the main thread');
  for (let i = 0; i < 5; i++) t.equal((await exchange(port, post(path, request))).body.toString(), 'good:3003020101');
  t.equal(thread.stats.asked, 1, 'the next five are answered by the thread alone');

  // A revocation of the issuer: committed before its call returns, and the very next request is fresh.
  state.answer = 'revoked';
  coherence.committed([ISSUER]);
  t.equal((await exchange(port, post(path, request))).body.toString(), 'revoked:3003020101', 'the next answer after the move is the new one');
  t.equal(thread.stats.asked, 2);
  // Any issuer's change moves it (one generation for all), and so does losing the LISTEN connection.
  coherence.pending(['another-issuer']);
  await exchange(port, post(path, request));
  coherence.dropAll();
  await exchange(port, post(path, request));
  t.equal(thread.stats.asked, 4, 'asked again after each move');

  // A nonce request is answered afresh every time, as is an answer the main thread does not mark reusable.
  const withNonce = Buffer.concat([Buffer.from('3016', 'hex'), request, NONCE_EXT]);
  await exchange(port, post(path, withNonce));
  await exchange(port, post(path, withNonce));
  t.equal(thread.stats.asked, 6, 'nonce requests always ask');
  state.reusableSecs = 0;
  const other = Buffer.from('3003020102', 'hex');
  await exchange(port, post(path, other));
  await exchange(port, post(path, other));
  t.equal(thread.stats.asked, 8, 'an answer not reusable is never kept');
  state.reusableSecs = 300;

  // GET form: kept the same way, by its path.
  const getPath = `${path}/MAMCAQE%3D`;
  await exchange(port, get(getPath));
  await exchange(port, get(getPath));
  t.equal(thread.stats.asked, 9, 'a GET answer is kept too');

  // The other routes: asked every time, their errors keep their status and shape.
  const bundle = await exchange(port, get('/certs/trust-bundle.pem'));
  t.match(bundle, { status: 200, headers: { 'content-type': 'application/pem-certificate-chain' } });
  t.equal(bundle.body.toString(), 'PEM');
  const cert = await exchange(port, get(`/certs/issuers/${ISSUER}/ca.crt`));
  t.same([...cert.body], [1, 2, 3]);
  const crl = await exchange(port, get(`/certs/issuers/${ISSUER}/crl`));
  t.equal(crl.status, 503);
  t.equal(crl.headers['retry-after'], '2');
  t.match(JSON.parse(crl.body.toString()), { error: 'no CRL now' });
  const boom = await exchange(port, get(`${path}/boom`));
  t.equal(boom.status, 500);
  t.notMatch(boom.body.toString(), /a bug/, 'an internal error says nothing of itself to the client');
  t.match(logged.join(''), /publication request failed/, 'and is logged by the main thread');
  t.same(calls.filter((c) => !c.startsWith('post:') && !c.startsWith('get:')), ['trustBundle', `ca:${ISSUER}`, 'crl']);
  t.equal((await exchange(port, get('/nothing'))).status, 404, 'unknown routes are refused by the thread itself');
});

t.test("the thread's own public_routes limit", async (t) => {
  const { handlers } = stubHandlers();
  const thread = createPublicationThread({ handlers, coherence: createPublicationCoherence(quietHub), rateLimits: noLimits(2), log: createLogger('silent') });
  const port = await thread.listen('127.0.0.1', 0);
  t.teardown(() => thread.close());
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await exchange(port, get('/certs/trust-bundle.pem'))).status);
  t.same(statuses, [200, 200, 429]);
});

t.test('a thread that dies is started again on its port; close frees the port; a taken port is refused', async (t) => {
  const { handlers, state } = stubHandlers();
  const logged: string[] = [];
  const thread = createPublicationThread({ handlers, coherence: createPublicationCoherence(quietHub), rateLimits: noLimits(), log: createLogger('error', (line) => void logged.push(line)) });
  const port = await thread.listen('127.0.0.1', 0);
  const path = `/certs/issuers/${ISSUER}/ocsp`;
  state.crashNext = true;
  await exchange(port, post(path, Buffer.from('3003020103', 'hex'))).catch(() => undefined);
  await waitUntil(() => logged.some((l) => l.includes('publication listener thread exited')), 5000, 'the thread to die');
  await waitUntil(async () => (await exchange(port, post(path, Buffer.from('3003020104', 'hex'))).catch(() => null))?.status === 200, 10_000,
    'the port answering again');
  t.pass('answering again on the same port');

  const taken = createPublicationThread({ handlers, coherence: createPublicationCoherence(quietHub), rateLimits: noLimits(), log: createLogger('silent') });
  await t.rejects(taken.listen('127.0.0.1', port), { code: 'EADDRINUSE' }, 'a second listener on the same port is refused');

  await thread.close();
  await t.rejects(exchange(port, get('/certs/trust-bundle.pem')), /ECONNREFUSED/, 'closed: the port is free');
});
