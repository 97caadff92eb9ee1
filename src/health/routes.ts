// GET /health, /health/ready (overall and component states, 200 ready / 503 not; the details are the
// GraphQL systemStatus, for platform administrators) and /health/live (process is up).
import type { HttpServer } from '../http/server.js';
import { json } from '../http/types.js';
import type { Health } from './service.js';

const LIVE = JSON.stringify({ status: 'ok' });

export function registerHealthRoutes(server: HttpServer, health: Health): void {
  const full = async () => {
    const report = await health.report();
    return json(report.ready ? 200 : 503, report.body, { 'cache-control': 'no-store' });
  };
  server.route('GET', '/health', full);
  server.route('GET', '/health/ready', full);
  server.route('GET', '/health/live', () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: LIVE }));
}
