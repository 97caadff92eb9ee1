// Scenario: the bare uWS handler itself, the baseline every efficiency is divided by (1.0 by definition).
export default {
  name: 'bare',
  description: 'bare uWebSockets.js handler answering 202, empty body (the efficiency baseline)',
  server: 'bare',
  request: () => ({ method: 'GET', path: '/', expectedStatus: 202 }),
};
