// Scenario: GraphQL resources(tenantId, limit: 50) { total items { id name kind createdAt } }, 1k of 11k resources, as the platform administrator and as the fleet's administrator, against the
// list floor (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-resources',
  description: 'resources(tenantId, limit: 50) { total items { id name kind createdAt } }, 1k of 11k resources, admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query ($t: ID!) { resources(tenantId: $t, limit: 50) { total items { id name kind createdAt } } }',
  floor: 'resources',
});
