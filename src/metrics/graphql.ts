// GraphQL executions by operation name (bounded: src/graphql/operation-tally.ts) and outcome.
import type { Registry } from 'prom-client';
import type { GraphqlExecutor } from '../graphql/executor.js';
import { one, scrapedCounter, scrapedGauge, type Sample } from './scraped.js';

export function graphqlMetrics(registry: Registry, executor: GraphqlExecutor): void {
  const { operations } = executor;
  scrapedCounter(registry, 'svc_graphql_operations_total', 'GraphQL operations executed, by operation name (anonymous, or other past the cap), type and outcome (ok, error: at least one error in the answer)', () => {
    const out: Sample[] = [];
    for (const s of operations.slots) {
      if (s.ok > 0) out.push({ labels: { operation: s.name, type: s.type, outcome: 'ok' }, value: s.ok });
      if (s.error > 0) out.push({ labels: { operation: s.name, type: s.type, outcome: 'error' }, value: s.error });
    }
    return out;
  });
  scrapedCounter(registry, 'svc_graphql_rejected_total', 'GraphQL requests refused before execution: syntax, validation, depth, cost or size limits', () => one(operations.rejected));
  scrapedCounter(registry, 'svc_graphql_compilations_total', 'Distinct documents parsed, validated and compiled (each is then reused from the compiled-query cache)', () => one(executor.stats.compilations));
  scrapedGauge(registry, 'svc_graphql_compiled_queries', 'Compiled documents held in the compiled-query cache', () => one(executor.stats.cached));
}
