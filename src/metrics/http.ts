// HTTP requests per listener and route pattern (src/http/server.ts counts them per route when measured):
// the label is the pattern a route was registered with (/http/m/:ws/c/:ch), never the path asked for.
import type { Registry } from 'prom-client';
import type { HttpServer } from '../http/server.js';
import { scrapedCounter, scrapedGauge, scrapedHistogram, type HistogramSample, type Sample } from './scraped.js';

const STATUS = ['aborted', '1xx', '2xx', '3xx', '4xx', '5xx'];

export function httpMetrics(registry: Registry, servers: readonly HttpServer[]): void {
  for (const server of servers) server.measure();
  scrapedCounter(registry, 'svc_http_requests_total', 'HTTP requests answered, by listener, method, route pattern and status class (aborted: the client left before the reply)', () => {
    const out: Sample[] = [];
    for (const server of servers) {
      for (const r of server.routeStats) {
        for (let i = 0; i < STATUS.length; i++) {
          const value = r.statuses[i] as number;
          if (value > 0) out.push({ labels: { listener: server.name, method: r.method, route: r.route, status: STATUS[i] as string }, value });
        }
      }
    }
    return out;
  });
  scrapedHistogram(registry, 'svc_http_request_duration_seconds', 'Seconds from a request\'s arrival to the end of its reply, by listener, method and route pattern', () => {
    const out: HistogramSample[] = [];
    for (const server of servers) {
      for (const r of server.routeStats) {
        if (r.latency.count > 0) out.push({ labels: { listener: server.name, method: r.method, route: r.route }, buckets: r.latency });
      }
    }
    return out;
  });
  scrapedGauge(registry, 'svc_http_requests_in_flight', 'HTTP requests being handled now, by listener', () =>
    servers.map((s) => ({ labels: { listener: s.name }, value: s.inFlight })));
}
