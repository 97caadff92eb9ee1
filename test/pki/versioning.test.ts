// Versioning (SPEC.md): the certificate subsystem is version 2 only. None of the removed version 1 names
// exist in the schema or over HTTP; the V2 operations do.
import t from 'tap';
import { startTestService } from '../helpers/service.js';

t.test('no version 1 certificate surface', async (t) => {
  const ts = await startTestService(t, { SVC_GRAPHQL_INTROSPECTION_ENABLED: 'true' });
  const res = await fetch(`${ts.url()}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ __schema { queryType { fields { name } } mutationType { fields { name } } types { name } } }' }),
  });
  const schema = ((await res.json()) as any).data.__schema;
  const names = new Set([...schema.queryType.fields, ...schema.mutationType.fields].map((f: { name: string }) => f.name));
  for (const removed of ['caChain', 'issueCertificate', 'issueCertificateFromCsr', 'renewCertificate', 'revokeCertificate', 'createApiKey']) {
    t.notOk(names.has(removed), `${removed} does not exist`);
  }
  for (const v2 of ['issueCertificateFromCsrV2', 'issueGeneratedCertificateV2', 'renewCertificateFromCsrV2', 'renewGeneratedCertificateV2',
    'revokeCertificateV2', 'revokeEntityCertificates', 'bulkRevokeCertificates', 'beginTenantAuthorityProvisioning',
    'provisionTenantAuthorityAutomatically', 'beginAuthorityRetirement', 'completeAuthorityRetirement', 'transitionRetirement',
    'pkiAuthority', 'pkiAuthorities', 'certificate', 'certificates']) {
    t.ok(names.has(v2), `${v2} exists`);
  }
  for (const [method, path] of [['GET', '/certs/ca-chain'], ['GET', '/certs/crl'], ['POST', '/certs/ocsp']]) {
    const r = await fetch(`${ts.url()}${path}`, { method });
    t.equal(r.status, 404, `${method} ${path} is gone`);
  }
});
