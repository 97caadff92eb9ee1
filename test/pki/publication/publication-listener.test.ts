// The publication listener (node:http) on its own, with stub answers: raw HTTP/1.0 and 1.1 requests as
// openssl sends them, answers written synchronously when the answer is (no promise in between) or when
// their promise settles, a body over the OCSP limit refused with 413 and the connection closed, errors as
// JSON, the public_routes limit, and the method and route refusals.
import t from 'tap';
import { AppError } from '../../../src/errors.js';
import type { RateLimiter } from '../../../src/http/rate-limit.js';
import type { HttpReply } from '../../../src/http/types.js';
import { createLogger } from '../../../src/log.js';
import { createPublicationListener } from '../../../src/pki/publication/publication-listener.js';
import { OCSP_BODY_LIMIT, type PublicationHandlers } from '../../../src/pki/publication/publication-routes.js';
import { rawExchange } from '../../helpers/publication.js';

const ISSUER = '11111111-2222-4333-8444-555555555555';
const OCSP = { 'content-type': 'application/ocsp-response', 'cache-control': 'no-store' };

const exchange = rawExchange;

/** A POST as openssl sends it (HTTP/1.0), or HTTP/1.1 closing, or HTTP/1.1 kept alive ('1.1-keep'). */
const post = (path: string, body: Buffer, version: '1.0' | '1.1' | '1.1-keep' = '1.0') =>
  [`POST ${path} HTTP/${version.slice(0, 3)}\r\nHost: x\r\nContent-Type: application/ocsp-request\r\nContent-Length: ${body.length}\r\n${version === '1.1' ? 'Connection: close\r\n' : ''}\r\n`, body];
const get = (path: string, method = 'GET') => [`${method} ${path} HTTP/1.0\r\nHost: x\r\n\r\n`];

t.test('publication listener', async (t) => {
  const seen: Buffer[] = [];
  let wait = 0;
  let ocspPost: (issuerId: string, body: Buffer) => HttpReply | Promise<HttpReply> = (_id, body) => {
    seen.push(body);
    return { status: 200, headers: OCSP, body: Buffer.concat([Buffer.from('answer:'), body]) };
  };
  const handlers = {
    trustBundle: async () => ({ status: 200, headers: { 'content-type': 'application/pem-certificate-chain' }, body: 'PEM' }),
    issuerCertificate: async () => ({ status: 200, headers: { 'content-type': 'application/pkix-cert' }, body: new Uint8Array([1, 2, 3]) }),
    crl: async () => { throw new AppError('UNAVAILABLE', 'no CRL now', { retryAfterSeconds: 2 }); },
    ocspPost: (issuerId: string, body: Buffer) => ocspPost(issuerId, body),
    ocspGet: () => ({ status: 200, headers: OCSP, body: Buffer.from('get') }),
  } as unknown as PublicationHandlers;
  let hits = 0;
  const limiter = { hit: () => (hits++, wait), limits: (category: string) => category === 'public_routes' } as unknown as RateLimiter;
  const logged: string[] = [];
  const listener = createPublicationListener({ handlers, limiter, log: createLogger('error', (line) => void logged.push(line)) });
  const port = await listener.listen('127.0.0.1', 0);
  t.teardown(() => listener.close());
  const path = `/certs/issuers/${ISSUER}/ocsp`;

  await t.test('HTTP/1.0 POST: the answer, its length, and the connection closed', async (t) => {
    const body = Buffer.from('3003020101', 'hex');
    const a = await exchange(port, post(path, body));
    t.equal(a.status, 200);
    t.equal(a.headers['content-type'], 'application/ocsp-response');
    t.equal(a.headers['content-length'], String(7 + body.length));
    t.same(a.body, Buffer.concat([Buffer.from('answer:'), body]));
  });

  await t.test('a body sent in pieces is answered whole', async (t) => {
    const body = Buffer.alloc(3000, 7);
    const [head] = post(path, body, '1.1');
    const a = await exchange(port, [head as string, body.subarray(0, 1000), body.subarray(1000, 2000), body.subarray(2000)], 20);
    t.equal(a.status, 200);
    t.same(seen.at(-1), body);
  });

  await t.test('an answer that waits (a promise) is sent when it settles', async (t) => {
    ocspPost = async (_id, body) => {
      await new Promise((r) => setTimeout(r, 20));
      return { status: 200, headers: OCSP, body: Buffer.concat([Buffer.from('later:'), body]) };
    };
    t.teardown(() => {
      ocspPost = (_id, body) => ({ status: 200, headers: OCSP, body });
    });
    const a = await exchange(port, post(path, Buffer.from('ab')));
    t.equal(a.status, 200);
    t.equal(a.body.toString(), 'later:ab');
  });

  await t.test('a body over the OCSP limit: 413 as JSON, then the connection closes', async (t) => {
    const before = seen.length;
    // Kept alive as far as the client is concerned: the exchange ends only if the server closes.
    const a = await exchange(port, post(path, Buffer.alloc(OCSP_BODY_LIMIT + 1, 1), '1.1-keep'));
    t.equal(a.status, 413);
    t.match(JSON.parse(a.body.toString()), { error: /too large|limit/i });
    t.equal(seen.length, before, 'the handler never saw it');
  });

  await t.test('errors are JSON with their status; unexpected ones are logged, thrown or rejected', async (t) => {
    ocspPost = () => {
      throw new Error('boom');
    };
    const thrown = await exchange(port, post(path, Buffer.from('x')));
    t.equal(thrown.status, 500);
    t.same(JSON.parse(thrown.body.toString()), { error: 'internal error' });
    ocspPost = async () => {
      throw new Error('boom later');
    };
    const rejected = await exchange(port, post(path, Buffer.from('x')));
    t.equal(rejected.status, 500);
    t.equal(logged.filter((l) => l.includes('publication request failed')).length, 2);
    const unavailable = await exchange(port, get(`/certs/issuers/${ISSUER}/crl`));
    t.equal(unavailable.status, 503);
    t.same(JSON.parse(unavailable.body.toString()), { error: 'no CRL now' });
    ocspPost = (_id, body) => ({ status: 200, headers: OCSP, body });
  });

  await t.test('routes and methods', async (t) => {
    t.equal((await exchange(port, get(path))).status, 405, 'GET on the POST form');
    t.equal((await exchange(port, get(path))).headers.allow, 'POST');
    const postOnGetForm = await exchange(port, post(`${path}/MAo=`, Buffer.from('x')));
    t.equal(postOnGetForm.status, 405);
    t.equal(postOnGetForm.headers.allow, 'GET, HEAD');
    t.equal((await exchange(port, get(`${path}/MAo=`))).body.toString(), 'get');
    t.equal((await exchange(port, get('/nowhere'))).status, 404);
    t.equal((await exchange(port, get(`/certs/issuers/${ISSUER}/crl/x`))).status, 404);
    t.equal((await exchange(port, get('/certs/trust-bundle.pem'))).body.toString(), 'PEM');
    const crt = await exchange(port, get(`/certs/issuers/${ISSUER}/ca.crt`));
    t.same([...crt.body], [1, 2, 3], 'a Uint8Array body as sent');
    const head = await exchange(port, get(`/certs/issuers/${ISSUER}/ca.crt`, 'HEAD'));
    t.equal(head.status, 200);
    t.equal(head.headers['content-length'], '3', 'HEAD: the length of what GET sends');
    t.equal(head.body.length, 0, 'and no body');
  });

  await t.test('the public_routes limit answers 429 with Retry-After before reading anything', async (t) => {
    wait = 7;
    t.teardown(() => {
      wait = 0;
    });
    const before = seen.length;
    const a = await exchange(port, post(path, Buffer.from('x')));
    t.equal(a.status, 429);
    t.equal(a.headers['retry-after'], '7');
    t.equal(seen.length, before);
    t.ok(hits > 0, 'every request was counted');
  });
});

t.test('with no limit on public_routes the limiter is never asked (no address lookup per request)', async (t) => {
  const handlers = {
    ocspPost: (_id: string, body: Buffer) => ({ status: 200, headers: OCSP, body }),
  } as unknown as PublicationHandlers;
  const limiter = {
    limits: () => false,
    hit: () => {
      throw new Error('hit() called for an unlimited category');
    },
  } as unknown as RateLimiter;
  const listener = createPublicationListener({ handlers, limiter, log: createLogger('error', () => undefined) });
  const port = await listener.listen('127.0.0.1', 0);
  t.teardown(() => listener.close());
  const a = await exchange(port, post(`/certs/issuers/${ISSUER}/ocsp`, Buffer.from('3003020101', 'hex')));
  t.equal(a.status, 200);
  t.same(a.body, Buffer.from('3003020101', 'hex'));
});
