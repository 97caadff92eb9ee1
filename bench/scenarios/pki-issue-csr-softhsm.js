// Scenario: pki-issue-csr with the tenant intermediate's key generated on a SoftHSM2 token (pkcs11 backend):
// every leaf signature is a PKCS#11 C_Sign in a worker thread's session.
import { countIssued, issuanceRequest, pkiEnv, setupIssuance } from '../lib/pki-fixture.js';

/** @type {Record<string, string> | undefined} */
let env;

export default {
  name: 'pki-issue-csr-softhsm',
  description: 'POST /graphql issueCertificateFromCsrV2 (P-256 CSR), CA key on a SoftHSM2 token',
  get env() {
    return (env ??= pkiEnv('pkcs11'));
  },
  connections: 64,
  setup: setupIssuance,
  request: issuanceRequest,
  teardown: countIssued,
};
