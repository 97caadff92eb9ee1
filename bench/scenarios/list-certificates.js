// Scenario: GraphQL certificates(tenantId, limit: 50) { total items { credentialId serialNumber status } }, 1k of 11k certificates, as the platform administrator and as the fleet's administrator, against the
// list floor (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-certificates',
  description: 'certificates(tenantId, limit: 50) { total items { credentialId serialNumber status } }, 1k of 11k certificates, admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query ($t: ID!) { certificates(tenantId: $t, limit: 50) { total items { credentialId serialNumber status } } }',
  floor: 'certificates',
});
