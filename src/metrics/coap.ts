// CoAP (UDP, no connections): requests, publishes by outcome, observations held.
import type { Registry } from 'prom-client';
import type { CoapServer } from '../coap/index.js';
import { one, scrapedCounter, scrapedGauge, type Sample } from './scraped.js';

/** coap: read at scrape time (the listener is bound after the metrics are set up, or not at all). */
export function coapMetrics(registry: Registry, coap: () => CoapServer | undefined): void {
  const read = (f: (s: CoapServer) => Sample[]): Sample[] => {
    const server = coap();
    return server ? f(server) : [];
  };
  scrapedCounter(registry, 'svc_coap_requests_total', 'CoAP requests received', () => read((s) => one(s.counters.requests)));
  scrapedCounter(registry, 'svc_coap_messages_total', 'CoAP publishes, by outcome (stored, refused)', () => read((s) => [
    { labels: { outcome: 'stored' }, value: s.counters.published }, { labels: { outcome: 'refused' }, value: s.counters.refused },
  ]));
  scrapedGauge(registry, 'svc_coap_observations', 'CoAP observations (RFC 7641 subscriptions) held now', () => read((s) => one(s.observations)));
}
