// Scenario: GraphQL tenants(limit: 50): 1,000 tenants for the platform administrator, the one tenant of the fleet's
// administrator, each against the
// list floor (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-tenants',
  description: 'tenants(limit: 50) { total items { id name status createdAt } }: 1,000 tenants for the platform admin, the one tenant of its admin, admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query { tenants(limit: 50) { total items { id name status createdAt } } }',
  floor: 'tenants',
  everyTenantForAdmin: true,
});
