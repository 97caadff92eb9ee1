// Authorization: decisions by outcome, the decision memo's hits and misses, runtime checks answered, and
// the size of the decision cache. All read from counters the engine keeps (src/authz/engine.ts).
import type { Registry } from 'prom-client';
import type { AuthzService } from '../authz/index.js';
import { one, scrapedCounter, scrapedGauge } from './scraped.js';

export function authzMetrics(registry: Registry, authz: AuthzService): void {
  const { tally } = authz.engine;
  const checks = authz.checkAudit.tally;
  scrapedCounter(registry, 'svc_authz_decisions_total', 'Decisions the engine answered (runtime checks, publishes, management API guards), by outcome', () => [
    { labels: { outcome: 'allow' }, value: tally.allowed },
    { labels: { outcome: 'deny' }, value: tally.denied },
  ]);
  scrapedCounter(registry, 'svc_authz_decision_cache_lookups_total', 'Decision lookups answered from the decision cache (hit) or computed from facts (miss)', () => [
    { labels: { result: 'hit' }, value: tally.hits },
    { labels: { result: 'miss' }, value: tally.misses },
  ]);
  scrapedCounter(registry, 'svc_authz_checks_total', 'Runtime checks answered (POST /authz/check, bulk, gRPC Check, GraphQL), by outcome', () => [
    { labels: { outcome: 'allow' }, value: checks.allowed },
    { labels: { outcome: 'deny' }, value: checks.denied },
  ]);
  scrapedGauge(registry, 'svc_authz_cache_entries', 'Entries in the decision cache, by kind', () => {
    const s = authz.stats();
    return [
      { labels: { kind: 'decisions' }, value: s.decisions }, { labels: { kind: 'subjects' }, value: s.subjects },
      { labels: { kind: 'policies' }, value: s.policies }, { labels: { kind: 'objects' }, value: s.objects },
      { labels: { kind: 'tenants' }, value: s.tenants }, { labels: { kind: 'ceilings' }, value: s.ceilings },
    ];
  });
  scrapedGauge(registry, 'svc_authz_cache_bytes', 'Estimated bytes the decision cache holds (bounded by SVC_AUTHZ_CACHE_MAX_BYTES)', () => one(authz.stats().bytes));
  scrapedCounter(registry, 'svc_authz_cache_invalidations_total', 'Invalidations applied to the decision cache (local writes and NOTIFYs from other instances)', () => one(authz.stats().invalidations));
}
