// Scenario: GraphQL entities(tenantId, limit: 50) over a fleet of 1,000 devices in a table of 100,000
// entities, as the platform administrator and as the fleet's administrator, against the list floor
// (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-entities',
  description: 'entities(tenantId, limit: 50) { total items { id name kind status createdAt } }, 1k of 100k entities, admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query ($t: ID!) { entities(tenantId: $t, limit: 50) { total items { id name kind status createdAt } } }',
  floor: 'entities',
});
