import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { ConfigError, describeConfig, loadConfig } from '../../src/config.js';
import { projectRoot } from '../../src/paths.js';

t.test('defaults load and listener addresses match DESIGN.md', async (t) => {
  const c = loadConfig({});
  t.same(c.listeners.http, { host: '0.0.0.0', port: 8080 });
  t.same(c.listeners.messaging, { host: '0.0.0.0', port: 8008 });
  t.same(c.listeners.reader, { host: '0.0.0.0', port: 9009 });
  t.same(c.listeners.brokerAdmin, { host: '127.0.0.1', port: 8082 });
  // The quick start (embedded database, no root configured) runs the development CA, enrollment on loopback.
  t.equal(c.pki.devCa.active, true);
  t.same(c.pki.enrollment.listen, { host: '127.0.0.1', port: 8443 });
  t.equal(c.pki.enrollment.enabled, true);
  t.equal(c.pki.enrollment.tlsCertPath, path.join(c.database.embedded.dataDir, 'pki', 'enrollment-server.pem'));
  t.equal(c.pki.rootCertPath, path.join(c.database.embedded.dataDir, 'pki', 'root-ca.pem'));
  t.equal(c.pki.caKeyEncryptionKeyId, 'dev-ca:v1');
  t.equal(c.pki.enrollment.maxCsrBytes, 65536);
  t.equal(c.pki.pkcs11.maxInFlight, 8);
  const own = loadConfig({ DATABASE_URL: 'postgres://db.example/svc' });
  t.equal(own.pki.devCa.active, false, 'with DATABASE_URL nothing is generated unless asked');
  t.same(own.pki.enrollment.listen, { host: '0.0.0.0', port: 8443 });
  t.equal(own.pki.enrollment.enabled, false);
  t.equal(own.pki.rootCertPath, undefined);
  t.equal(own.pki.caKeyEncryptionKeyId, 'local-ca:v1');
  t.equal(c.graphql.introspection, false);
  t.equal(c.graphql.maxDepth, 20);
  t.equal(c.database.url, undefined, 'no DATABASE_URL means the embedded server');
});

t.test('the development CA: asked for, switched off, and a configured root wins', async (t) => {
  const url = { DATABASE_URL: 'postgres://db.example/svc' };
  t.equal(loadConfig({ ...url, SVC_PKI_DEV_CA: 'on' }).pki.devCa.active, true, 'on: also with DATABASE_URL');
  t.equal(loadConfig({ SVC_PKI_DEV_CA: 'off' }).pki.devCa.active, false, 'off: not even on the embedded database');
  t.equal(loadConfig({ SVC_PKI_DEV_CA: 'off' }).pki.enrollment.enabled, false);
  const rooted = loadConfig({ SVC_PKI_DEV_CA: 'on', SVC_PKI_ROOT_CERT_PATH: '/etc/pki/root.pem' });
  t.equal(rooted.pki.devCa.active, false, 'a configured root wins');
  t.equal(rooted.pki.rootCertPath, '/etc/pki/root.pem');
  t.equal(loadConfig({ SVC_PKI_ENROLLMENT_ENABLED: 'false' }).pki.enrollment.enabled, false, 'enrollment can still be switched off');
  t.throws(() => loadConfig({ SVC_PKI_DEV_CA: 'sometimes' }), /SVC_PKI_DEV_CA/);
  t.throws(() => loadConfig({ SVC_PKI_PLATFORM_INTERMEDIATE_CERT_PATH: '/a.pem', SVC_PKI_PLATFORM_INTERMEDIATE_KEY_PATH: '/a.key' }),
    /needs SVC_PKI_ROOT_CERT_PATH/);
});

t.test('a listener can be switched off and IPv6 addresses parse', async (t) => {
  const c = loadConfig({ SVC_MQTT_ADDR: 'off', SVC_HTTP_ADDR: '[::1]:0' });
  t.equal(c.listeners.mqtt, null);
  t.same(c.listeners.http, { host: '::1', port: 0 });
});

t.test('every problem is reported at once', async (t) => {
  const err = t.throws(() => loadConfig({
    SVC_HTTP_ADDR: 'nonsense',
    SVC_GRAPHQL_MAX_DEPTH: 'deep',
    SVC_RATE_LIMIT_ENABLED: 'maybe',
    SVC_LOG_LEVEL: 'loud',
    SVC_KEY_ENCRYPTION_KEY: 'c2VjcmV0LXZhbHVl',
    SVC_PKI_CA_KEY_BACKEND: 'pkcs11',
    SVC_PKI_ENROLLMENT_ENABLED: 'true',
    DATABASE_URL: 'not a url',
  })) as ConfigError;
  t.ok(err instanceof ConfigError);
  const text = err.message;
  for (const name of ['SVC_HTTP_ADDR', 'SVC_GRAPHQL_MAX_DEPTH', 'SVC_RATE_LIMIT_ENABLED', 'SVC_LOG_LEVEL',
    'SVC_KEY_ENCRYPTION_KEY', 'SVC_PKI_PKCS11_MODULE_PATH', 'SVC_PKI_PKCS11_USER_PIN',
    'SVC_PKI_ENROLLMENT_TLS_CERT_PATH', 'DATABASE_URL']) {
    t.match(text, name, `names ${name}`);
  }
  t.ok(err.problems.length >= 9, `${err.problems.length} problems listed`);
  t.notMatch(text, 'c2VjcmV0LXZhbHVl', 'a secret value is never echoed');
  t.notMatch(text, 'not a url', 'the database URL (it may hold a password) is never echoed');
});

t.test('certificate publication: its own listener on by default, its own base URL apart from SVC_PUBLIC_BASE_URL', async (t) => {
  const c = loadConfig({});
  t.same(c.listeners.pkiPublication, { host: '0.0.0.0', port: 8089 }, 'on by default (issue 33: openssl ocsp on the default configuration)');
  t.equal(c.pki.publicationBaseUrl, null, 'unset: follows the publication listener once bound');
  t.equal(loadConfig({ SVC_PKI_PUBLICATION_ADDR: 'off' }).listeners.pkiPublication, null, 'off still disables it');
  const set = loadConfig({ SVC_PKI_PUBLICATION_BASE_URL: 'http://pki.example.com/pub/', SVC_PUBLIC_BASE_URL: 'https://iam.example.com' });
  t.equal(set.pki.publicationBaseUrl, 'http://pki.example.com/pub', 'a path prefix is kept, the trailing slash dropped');
  t.equal(set.publicBaseUrl, 'https://iam.example.com', 'the public base URL is its own setting');
  t.throws(() => loadConfig({ SVC_PKI_PUBLICATION_BASE_URL: 'ftp://pki.example.com' }), /SVC_PKI_PUBLICATION_BASE_URL must be an http or https URL/);
  t.throws(() => loadConfig({ SVC_PKI_PUBLICATION_BASE_URL: 'http://pki.example.com/?a=1' }), /SVC_PKI_PUBLICATION_BASE_URL must be a base without query/);
  t.throws(() => loadConfig({ SVC_PKI_PUBLICATION_BASE_URL: 'pki.example.com' }), /SVC_PKI_PUBLICATION_BASE_URL is not a valid URL/);
});

t.test('the two CA key-encryption keys must differ', async (t) => {
  const key = Buffer.alloc(32, 7).toString('base64');
  t.throws(() => loadConfig({ SVC_KEY_ENCRYPTION_KEY: key, SVC_PKI_CA_KEY_ENCRYPTION_KEY: key }), /must differ/);
});

t.test('scrypt parameters scrypt itself would refuse are refused at start', async (t) => {
  t.throws(() => loadConfig({ SVC_SCRYPT_COST: '3000' }), /SVC_SCRYPT_COST must be a power of two/);
  t.throws(() => loadConfig({ SVC_SCRYPT_COST: '65536', SVC_SCRYPT_BLOCK_SIZE: '1' }), /SVC_SCRYPT_COST must be below 2\^16 when SVC_SCRYPT_BLOCK_SIZE is 1/);
  t.throws(() => loadConfig({ SVC_SCRYPT_COST: '4194304', SVC_SCRYPT_BLOCK_SIZE: '8' }), /the memory of one hash\) must be at most 1 GiB/);
  t.equal(loadConfig({ SVC_SCRYPT_COST: '32768', SVC_SCRYPT_BLOCK_SIZE: '1' }).auth.scrypt.cost, 32768);
});

t.test('the CoAP upload room holds at least one whole message', async (t) => {
  t.throws(() => loadConfig({ SVC_MESSAGING_MAX_MESSAGE_BYTES: '65536', SVC_COAP_MAX_BLOCK_BYTES_HELD: '32768' }), /SVC_COAP_MAX_BLOCK_BYTES_HELD must be at least SVC_MESSAGING_MAX_MESSAGE_BYTES/);
  t.equal(loadConfig({ SVC_MESSAGING_MAX_MESSAGE_BYTES: '65536', SVC_COAP_MAX_BLOCK_BYTES_HELD: '65536' }).broker.coapMaxBlockBytesHeld, 65536);
});

t.test('one answer holds at least one stored document and one stored message', async (t) => {
  t.throws(() => loadConfig({ SVC_ANSWER_MAX_BYTES: '8192', SVC_JSON_DOCUMENT_MAX_BYTES: '16384' }), /SVC_ANSWER_MAX_BYTES must be at least SVC_JSON_DOCUMENT_MAX_BYTES/);
  t.throws(() => loadConfig({ SVC_ANSWER_MAX_BYTES: '65536' }), /SVC_ANSWER_MAX_BYTES must be at least SVC_MESSAGING_MAX_MESSAGE_BYTES/);
  const c = loadConfig({ SVC_ANSWER_MAX_BYTES: '65536', SVC_MESSAGING_MAX_MESSAGE_BYTES: '65536' });
  t.same([c.graphql.answerMaxBytes, c.customEndpoints.answerMaxBytes, c.messaging.reader.answerMaxBytes], [65536, 65536, 65536], 'every surface');
  t.same(c.documents, { maxBytes: 16384, maxDepth: 32 });
});

t.test('describeConfig never shows the database password', async (t) => {
  const c = loadConfig({ DATABASE_URL: 'postgres://u:hunter2@db:5432/x' });
  t.notMatch(JSON.stringify(describeConfig(c)), 'hunter2');
});

t.test('the program refuses invalid config with exit code 2 and lists every problem', async (t) => {
  const child = spawn(process.execPath, [path.join(projectRoot, 'dist/src/main.js')], {
    env: { PATH: process.env.PATH, SVC_HTTP_ADDR: 'x', SVC_DB_POOL_MAX: '0', SVC_ADMIN_SECRET: 'hunter2-secret' },
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  t.equal(code, 2);
  t.match(stderr, 'SVC_HTTP_ADDR');
  t.match(stderr, 'SVC_DB_POOL_MAX');
  t.notMatch(stderr, 'hunter2');
});
