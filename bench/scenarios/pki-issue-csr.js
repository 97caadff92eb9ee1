// Scenario: issueCertificateFromCsrV2 through GraphQL (ECDSA P-256 CSR, tenant intermediate with its key in
// the encrypted_database backend), many in flight: certificates/s and server CPU per certificate. Target
// (issue 25): at least 1,000 certificates/s on this 2-core machine, generator included.
import { countIssued, issuanceRequest, pkiEnv, setupIssuance } from '../lib/pki-fixture.js';

/** @type {Record<string, string> | undefined} */
let env;

export default {
  name: 'pki-issue-csr',
  description: 'POST /graphql issueCertificateFromCsrV2 (P-256 CSR), CA key in the encrypted database',
  get env() {
    return (env ??= pkiEnv('encrypted_database'));
  },
  connections: 64,
  setup: setupIssuance,
  request: issuanceRequest,
  teardown: countIssued,
};
