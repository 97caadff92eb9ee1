// The registry /metrics answers from: prom-client's, with its process and Node.js runtime metrics
// (CPU, memory, event-loop lag, GC, handles) collected at scrape time.
import { collectDefaultMetrics, Registry } from 'prom-client';

export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}
