// Custom endpoint calls beyond what the HTTP route series show: calls cut at the time limit, the
// statements of theirs that were stopped, and what became of the execution records.
import type { Registry } from 'prom-client';
import type { CustomEndpoints } from '../custom-endpoints/index.js';
import { scrapedCounter } from './scraped.js';

export function customEndpointMetrics(registry: Registry, endpoints: CustomEndpoints): void {
  scrapedCounter(registry, 'svc_custom_endpoint_timeouts_total', 'Custom endpoint calls answered "custom endpoint execution timed out"', () =>
    [{ labels: {}, value: endpoints.stats.timeouts }]);
  scrapedCounter(registry, 'svc_custom_endpoint_statements_stopped_total', 'Statements of timed-out custom endpoint calls cancelled while running or queued, or refused before being sent', () =>
    [{ labels: {}, value: endpoints.stats.statementsStopped }]);
  scrapedCounter(registry, 'svc_custom_endpoint_execution_records_total', 'Custom endpoint execution records, by outcome: written, or dropped (queue full or refused by the database)', () => {
    const s = endpoints.executions.stats;
    return [{ labels: { outcome: 'written' }, value: s.written }, { labels: { outcome: 'dropped' }, value: s.dropped }];
  });
}
