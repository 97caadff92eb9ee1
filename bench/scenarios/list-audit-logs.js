// Scenario: GraphQL auditLogs(tenantId, limit: 50) { total items { id event outcome createdAt } }, 1k of 11k entries (plus what the service writes), as the platform administrator and as the fleet's administrator, against the
// list floor (bare SQL through postgres.js) in the same run (lib/list-bench.js).
import { fileURLToPath } from 'node:url';
import { listScenario } from '../lib/list-bench.js';

export default listScenario({
  name: 'list-audit-logs',
  description: 'auditLogs(tenantId, limit: 50) { total items { id event outcome createdAt } }, 1k of 11k entries (plus what the service writes), admin and tenant admin vs bare SQL',
  file: fileURLToPath(import.meta.url),
  query: 'query ($t: ID!) { auditLogs(tenantId: $t, limit: 50) { total items { id event outcome createdAt } } }',
  floor: 'auditLogs',
});
