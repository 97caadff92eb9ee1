// Execution records keep no secrets, whatever they are called: secret outputs (a generated private key, a
// shared key, an access token, a session token) under any alias or responseMapping key, secret arguments
// and input fields fed by variables of any name (in a literal or through a typed input variable), values
// quoted by a variable's coercion error, and every header mapped into variables. The live schema's fields
// named like secrets are each marked @secret or reviewed as not secret.
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { schemaCoordinates } from '../../src/graphql/secret.js';
import { REDACTED } from '../../src/custom-endpoints/redaction.js';
import { ADMIN_SECRET, adminToken, insertEntity, insertTenant, startAuthService } from '../helpers/auth.js';
import { makeCaFiles } from '../helpers/pki.js';
import { callEndpoint, createEndpoint, executionsOf } from './helpers.js';

// Names that suggest a secret; a field, argument or input field so named is @secret unless reviewed below.
const SECRET_LIKE = /pass(word|phrase)|secret|token|key|private/i;
const NOT_SECRET: Record<string, string> = {
  'Query.accessTokens': 'lists token metadata, never a token',
  'Query.signingKeys': 'lists signing key metadata (kid, status), never key material',
  'SigningKey.keyEncryptionKeyId': 'the id of the key-encryption key, not the key',
  'SigningKeyState.configuredKeyId': 'the id of the key-encryption key, not the key',
  'SystemStatus.signingKeys': 'a health check of the signing keys',
  'SystemStatus.signingKeyState': 'how the signing keys are stored',
  'Mutation.createPassword': 'returns a Boolean; its password argument is @secret',
  'Mutation.changeOwnPassword': 'returns a Boolean; its arguments are @secret',
  'Mutation.createSharedKey': 'the field; its answer type carries the @secret key',
  'Mutation.createAccessToken': 'the field; its answer type carries the @secret token',
  'Mutation.replaceAccessTokenPermissions': 'returns a Boolean',
  'Mutation.revokeAccessToken': 'returns a Boolean',
  'Mutation.rotateSigningKeys': 'returns a Boolean',
  'Mutation.acceptTenantInvitationToken': 'returns a tenant id; its input carries the @secret token',
  'Profile.key': 'a machine identifier',
  'CreateProfileInput.key': 'a machine identifier',
  'ApiEndpoint.key': 'a machine identifier',
  'CreateApiEndpointInput.key': 'a machine identifier',
  'UpdateApiEndpointInput.key': 'a machine identifier',
  'Authority.subjectKeyId': 'a public key identifier',
  'Authority.authorityKeyId': 'a public key identifier',
  'Authority.keyBackend': 'where the key is held',
  'Authority.keyAlgorithm': 'an algorithm name',
  'Certificate.subjectKeyId': 'a public key identifier',
  'Certificate.keyAlgorithm': 'an algorithm name',
  'CertificateProfile.keyAlgorithms': 'algorithm names',
  'CertificateProfile.extendedKeyUsages': 'usage names',
  'CreateCertificateProfileInput.keyAlgorithms': 'algorithm names',
  'CreateCertificateProfileInput.extendedKeyUsages': 'usage names',
  'UpdateCertificateProfileInput.keyAlgorithms': 'algorithm names',
  'UpdateCertificateProfileInput.extendedKeyUsages': 'usage names',
  'IssueCertificateFromCsrV2Input.idempotencyKey': 'a replay key: a replay never returns a private key',
  'IssueGeneratedCertificateV2Input.idempotencyKey': 'a replay key: a replay never returns a private key',
  'RenewCertificateFromCsrV2Input.idempotencyKey': 'a replay key: a replay never returns a private key',
  'RenewGeneratedCertificateV2Input.idempotencyKey': 'a replay key: a replay never returns a private key',
};

t.test('execution records keep no secrets', async (t) => {
  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, { ...ca.env, SVC_PKI_GENERATED_KEY_ISSUANCE_ENABLED: 'true' });
  const admin = await adminToken(ts);
  const tenant = await insertTenant(ts, 'fleet');
  const human = await insertEntity(ts, { name: 'operator' });
  /** The endpoint's newest record as text, checked to hold none of the secrets. */
  const lastRecord = async (t: Test, id: string, secrets: string[]) => {
    const [record] = await executionsOf(ts, id);
    const text = JSON.stringify(record);
    for (const s of secrets) t.notOk(text.includes(s), `${s.slice(0, 24)}… is not in the record`);
    return record;
  };

  await t.test('the live schema: every field named like a secret is @secret or reviewed as not one', async (t) => {
    const coordinates = schemaCoordinates(ts.service.graphql.schema);
    const unmarked = coordinates.filter((c) => SECRET_LIKE.test(c.name) && !c.secret && !(c.coordinate in NOT_SECRET)).map((c) => c.coordinate);
    t.same(unmarked, [], 'mark each @secret in its schema.graphql, or add it to NOT_SECRET with the reason');
    const secret = coordinates.filter((c) => c.secret).map((c) => c.coordinate).sort();
    t.same(secret, [
      'AccessTokenResponse.token', 'CreateSharedKeyInput.key', 'InvitationTokenInput.token', 'IssuedCertificate.privateKeyPem', 'LoginInput.secret',
      'LoginResponse.token', 'Mutation.changeOwnPassword(currentPassword:)', 'Mutation.changeOwnPassword(newPassword:)',
      'Mutation.createPassword(password:)', 'SharedKeyResponse.key', 'SignupInput.password',
    ], 'the secrets of the schema');
    const known = new Set(coordinates.map((c) => c.coordinate));
    t.same(Object.keys(NOT_SECRET).filter((c) => !known.has(c)), [], 'every reviewed name still exists');
  });

  await t.test('a generated private key under a responseMapping key', async (t) => {
    const device = await insertEntity(ts, { name: 'gen-1', kind: 'device', tenantId: tenant });
    const e = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/provision', operationKind: 'mutation',
      graphql: 'mutation ($d: ID!) { issueGeneratedCertificateV2(input: {entityId: $d}) { privateKeyPem certificate { certificatePem } } }',
      variablesMapping: { d: '$body.device' },
      responseMapping: { material: '$.issueGeneratedCertificateV2.privateKeyPem', cert: '$.issueGeneratedCertificateV2.certificate.certificatePem' },
    });
    const res = await callEndpoint(ts, '/api/custom/provision', { token: admin, method: 'POST', body: { device } });
    t.equal(res.status, 200);
    t.match(res.body.material, /^-----BEGIN PRIVATE KEY-----/, 'the caller gets its key');
    const keyBody = (res.body.material as string).replace(/-----[^-]+-----/g, '').replace(/\s/g, '');
    const record = await lastRecord(t, e.id, [keyBody.slice(20, 60)]);
    t.equal(record.responseSummary.material, REDACTED);
    t.equal(record.responseSummary.cert, res.body.cert, 'what is not secret is kept');
  });

  await t.test('a shared key: generated in the answer, chosen in a literal and in a typed input variable', async (t) => {
    const device = await insertEntity(ts, { name: 'meter-1', kind: 'device', tenantId: tenant });
    const generated = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/keys', operationKind: 'mutation',
      graphql: 'mutation ($d: ID!) { k: createSharedKey(entityId: $d) { credentialId material: key } }',
      variablesMapping: { d: '$body.device' },
    });
    const res = await callEndpoint(ts, '/api/custom/keys', { token: admin, method: 'POST', body: { device } });
    t.equal(res.status, 200);
    const record = await lastRecord(t, generated.id, [res.body.k.material]);
    t.same(record.responseSummary, { k: { credentialId: res.body.k.credentialId, material: REDACTED } });

    const inLiteral = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/keys-chosen', operationKind: 'mutation',
      graphql: 'mutation ($d: ID!, $c: String) { createSharedKey(entityId: $d, input: {description: "x", key: $c}) { credentialId } }',
      variablesMapping: { d: '$body.device', c: '$body.c' },
    });
    const chosen = randomBytes(16).toString('hex');
    t.equal((await callEndpoint(ts, '/api/custom/keys-chosen', { token: admin, method: 'POST', body: { device, c: chosen } })).status, 200);
    t.same((await lastRecord(t, inLiteral.id, [chosen])).requestSummary.variables, { d: device, c: REDACTED });

    const typed = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/keys-typed', operationKind: 'mutation',
      graphql: 'mutation ($d: ID!, $in: CreateSharedKeyInput) { createSharedKey(entityId: $d, input: $in) { credentialId } }',
    });
    const chosen2 = randomBytes(16).toString('hex');
    t.equal((await callEndpoint(ts, '/api/custom/keys-typed', { token: admin, method: 'POST', body: { d: device, in: { description: 'y', key: chosen2 } } })).status, 200);
    t.same((await lastRecord(t, typed.id, [chosen2])).requestSummary.variables, { d: device, in: { description: 'y', key: REDACTED } });
  });

  await t.test('an access token under a responseMapping key', async (t) => {
    const e = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/tokens', operationKind: 'mutation',
      graphql: 'mutation { createAccessToken(input: {name: "ci", scoped: false, permissions: []}) { credentialId token } }',
      responseMapping: { bearer: '$.createAccessToken.token', id: '$.createAccessToken.credentialId' },
    });
    const res = await callEndpoint(ts, '/api/custom/tokens', { token: admin, method: 'POST' });
    t.equal(res.status, 200);
    t.match(res.body.bearer, /^svc_/);
    const record = await lastRecord(t, e.id, [res.body.bearer]);
    t.same(record.responseSummary, { bearer: REDACTED, id: res.body.id });
  });

  await t.test('a password passed as a variable named p, and one quoted by a coercion error', async (t) => {
    const e = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/password', operationKind: 'mutation',
      graphql: 'mutation ($id: ID!, $p: String!) { createPassword(entityId: $id, password: $p) }',
      variablesMapping: { id: '$body.id', p: '$body.p' },
    });
    const password = `pw-${randomBytes(12).toString('hex')}`;
    t.equal((await callEndpoint(ts, '/api/custom/password', { token: admin, method: 'POST', body: { id: human, p: password } })).status, 200);
    t.same((await lastRecord(t, e.id, [password])).requestSummary.variables, { id: human, p: REDACTED });

    const res = await callEndpoint(ts, '/api/custom/password', { token: admin, method: 'POST', body: { id: human, p: 987654321987 } });
    t.same(res, { status: 400, body: { error: 'GraphQL execution failed' } });
    const failed = await lastRecord(t, e.id, ['987654321987']);
    t.equal(failed.status, 'error');
    t.match(failed.responseSummary.errors[0].message, /^Variable "\$p" got invalid value <redacted>$/);
  });

  await t.test('a login: the secret in a literal input, the session token under an alias', async (t) => {
    const e = await createEndpoint(ts, {
      method: 'POST', path: '/api/custom/login', operationKind: 'mutation',
      graphql: 'mutation ($i: String!, $s: String!) { login(input: {identifier: $i, secret: $s}) { session: token entityId } }',
      variablesMapping: { i: '$body.user', s: '$body.s' },
    });
    const res = await callEndpoint(ts, '/api/custom/login', { method: 'POST', token: admin, body: { user: 'admin', s: ADMIN_SECRET } });
    t.equal(res.status, 200);
    const record = await lastRecord(t, e.id, [ADMIN_SECRET, res.body.login.session]);
    t.same(record.requestSummary.variables, { i: 'admin', s: REDACTED });
    t.same(record.responseSummary.login, { session: REDACTED, entityId: res.body.login.entityId });
  });

  await t.test('every header mapped into variables, a Bearer token among them', async (t) => {
    const e = await createEndpoint(ts, {
      method: 'GET', path: '/api/custom/headers', operationKind: 'query',
      graphql: 'query ($who: String, $tag: String) { tenants(q: $who, name: $tag) { total } }',
      variablesMapping: { who: '$headers.authorization', tag: '$headers.x-tag' },
    });
    const res = await callEndpoint(ts, '/api/custom/headers', { token: admin, headers: { 'x-tag': 'plain-tag-value' } });
    t.equal(res.status, 200);
    const record = await lastRecord(t, e.id, [admin, 'plain-tag-value']);
    t.same(record.requestSummary.variables, { who: REDACTED, tag: REDACTED });
  });

  await t.test('an operation that does not validate keeps no variable values', async (t) => {
    const [row] = await ts.service.sql<{ id: string }[]>`
      insert into api_endpoints (key, name, method, path, operation_kind, graphql, status)
      values ('broken', 'broken', 'POST', '/api/custom/broken', 'mutation', 'mutation ($x: String!) { createPassword(entityId: "a", pw: $x) }', 'active')
      returning id`;
    await ts.service.customEndpoints.router.reload(row!.id);
    const res = await callEndpoint(ts, '/api/custom/broken', { token: admin, method: 'POST', body: { x: 'hidden-value-1' } });
    t.equal(res.status, 400);
    t.same((await lastRecord(t, row!.id, ['hidden-value-1'])).requestSummary.variables, { x: REDACTED });
  });
});
