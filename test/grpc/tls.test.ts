// The gRPC listener with TLS (SVC_GRPC_TLS_CERT_PATH/_KEY_PATH) and mTLS (SVC_GRPC_TLS_CLIENT_CA_PATH), with
// certificates made by openssl for this test: clients loaded from the repository's proto call over the
// secured channel; plaintext, an untrusted server, and under mTLS a client without a certificate (or with
// one from another CA) are refused.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ADMIN_ID, AUTH_ENV, adminToken } from '../helpers/auth.js';
import { makeCertificates } from '../helpers/certificates.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { grpcClient, type Reply } from './helpers.js';

const files = makeCertificates();
const stranger = makeCertificates();
const ca = readFileSync(files.ca);
const db = await createTestDatabase();
t.teardown(() => db.drop());

/** Authenticate (no metadata) and Check (bearer metadata) over one channel. */
async function callBoth(ts: TestService, credentials: grpc.ChannelCredentials): Promise<[Reply, Reply]> {
  // The certificate names localhost too: naming it avoids TLS SNI with an IP address (not allowed by RFC 6066).
  const client = grpcClient(`127.0.0.1:${ts.service.ports.grpc}`, credentials, { 'grpc.ssl_target_name_override': 'localhost' });
  try {
    const token = await adminToken(ts);
    const who = await client.call('AuthService', 'Authenticate', { token }, { deadlineMs: 5000 });
    const check = await client.call('AuthzService', 'Check', { subject_id: ADMIN_ID, action: 'manage', object_kind: 'platform' }, { token, deadlineMs: 5000 });
    return [who, check];
  } finally {
    client.close();
  }
}

t.test('TLS: a client trusting the CA is served; plaintext and an untrusting client are refused', async (t) => {
  const ts = await startTestService(t, { ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0', SVC_GRPC_TLS_CERT_PATH: files.cert, SVC_GRPC_TLS_KEY_PATH: files.key }, db);
  const [who, check] = await callBoth(ts, grpc.credentials.createSsl(ca));
  t.match(who, { err: null, res: { entity_id: ADMIN_ID } }, 'AuthService.Authenticate over TLS');
  t.match(check, { err: null, res: { allowed: true } }, 'AuthzService.Check over TLS');
  t.match((await callBoth(ts, grpc.credentials.createInsecure()))[0], { err: { code: grpc.status.UNAVAILABLE } }, 'plaintext: refused');
  t.match((await callBoth(ts, grpc.credentials.createSsl(readFileSync(stranger.ca))))[0], { err: { code: grpc.status.UNAVAILABLE } },
    'a client that does not trust the server certificate: refused');
});

t.test('mTLS: only clients with a certificate of the client CA', async (t) => {
  const ts = await startTestService(t, {
    ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_GRPC_TLS_CERT_PATH: files.cert, SVC_GRPC_TLS_KEY_PATH: files.key, SVC_GRPC_TLS_CLIENT_CA_PATH: files.ca,
  }, db);
  const [who, check] = await callBoth(ts, grpc.credentials.createSsl(ca, readFileSync(files.clientKey), readFileSync(files.clientCert)));
  t.match(who, { err: null, res: { entity_id: ADMIN_ID } }, 'AuthService.Authenticate with a client certificate');
  t.match(check, { err: null, res: { allowed: true, reason: 'allowed' } }, 'AuthzService.Check with a client certificate');
  t.match((await callBoth(ts, grpc.credentials.createSsl(ca)))[0], { err: { code: grpc.status.UNAVAILABLE } }, 'no client certificate: refused');
  t.match((await callBoth(ts, grpc.credentials.createSsl(ca, readFileSync(stranger.clientKey), readFileSync(stranger.clientCert))))[0],
    { err: { code: grpc.status.UNAVAILABLE } }, 'a certificate of another CA: refused');
  t.match((await callBoth(ts, grpc.credentials.createInsecure()))[0], { err: { code: grpc.status.UNAVAILABLE } }, 'plaintext: refused');
});

t.test('a missing key file stops the start with a clear message', async (t) => {
  await t.rejects(startTestService(t, { ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0', SVC_GRPC_TLS_CERT_PATH: files.cert, SVC_GRPC_TLS_KEY_PATH: '/nonexistent/key.pem' }, db),
    { message: /gRPC key \/nonexistent\/key.pem cannot be read/ });
});
