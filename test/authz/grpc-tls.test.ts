// The gRPC listener with TLS (SVC_GRPC_TLS_CERT_PATH/_KEY_PATH) and mTLS (SVC_GRPC_TLS_CLIENT_CA_PATH):
// certificates made with openssl for this test; AuthzService.Check answers over the secured channel only.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { loadServices, serviceOf } from '../../src/grpc/server.js';
import { AUTH_ENV, adminToken } from '../helpers/auth.js';
import { makeCertificates } from '../helpers/certificates.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';

t.test('gRPC over TLS and mTLS', async (t) => {
  const files = makeCertificates();
  const ts = await startTestService(t, {
    ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0',
    SVC_GRPC_TLS_CERT_PATH: files.cert, SVC_GRPC_TLS_KEY_PATH: files.key, SVC_GRPC_TLS_CLIENT_CA_PATH: files.ca,
  });
  const token = await adminToken(ts);
  const Client = serviceOf(loadServices(), 'AuthzService');
  const target = `127.0.0.1:${ts.service.ports.grpc}`;
  const ask = (credentials: grpc.ChannelCredentials) => new Promise<{ err: grpc.ServiceError | null; res: any }>((resolve) => {
    const client = new Client(target, credentials) as any;
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    // The platform administrator asking about itself at platform scope.
    client.Check({ subject_id: '00000000-0000-0000-0000-000000000001', action: 'manage', object_kind: 'platform' }, md, { deadline: Date.now() + 5000 },
      (err: grpc.ServiceError | null, res: any) => {
        client.close();
        resolve({ err, res });
      });
  });
  const ca = readFileSync(files.ca);
  t.match(await ask(grpc.credentials.createSsl(ca, readFileSync(files.clientKey), readFileSync(files.clientCert))),
    { err: null, res: { allowed: true, reason: 'allowed' } }, 'TLS with a client certificate');
  t.not((await ask(grpc.credentials.createSsl(ca))).err, null, 'no client certificate: refused (mTLS)');
  t.not((await ask(grpc.credentials.createInsecure())).err, null, 'plaintext: refused');
});

t.test('a missing key file stops the start with a clear message', async (t) => {
  const files = makeCertificates();
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  await t.rejects(startTestService(t, { ...AUTH_ENV, SVC_GRPC_ADDR: '127.0.0.1:0', SVC_GRPC_TLS_CERT_PATH: files.cert, SVC_GRPC_TLS_KEY_PATH: '/nonexistent/key.pem' }, db),
    { message: /gRPC key \/nonexistent\/key.pem cannot be read/ });
});
