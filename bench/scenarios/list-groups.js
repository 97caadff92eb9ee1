// Scenario: GraphQL groups(tenantId, limit: 50) { total items { id name groupType createdAt } }, 1k of 11k object groups, as the platform administrator and as the fleet's administrator, against the
// list floor (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-groups',
  description: 'groups(tenantId, limit: 50) { total items { id name groupType createdAt } }, 1k of 11k object groups, admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query ($t: ID!) { groups(tenantId: $t, limit: 50) { total items { id name groupType createdAt } } }',
  floor: 'groups',
});
