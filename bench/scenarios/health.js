// Scenario: the service's liveness route: routing and a JSON reply, no database.
export default {
  name: 'health',
  description: 'GET /health/live on the http listener (no database)',
  request: () => ({ method: 'GET', path: '/health/live', expectedStatus: 200 }),
};
