// gRPC calls by method and status code, counted by the unary wrapper (src/grpc/call.ts).
import * as grpc from '@grpc/grpc-js';
import type { Registry } from 'prom-client';
import type { GrpcServer } from '../grpc/server.js';
import { one, scrapedCounter, type Sample } from './scraped.js';

const CODE_NAMES: string[] = [];
for (const [name, value] of Object.entries(grpc.status)) if (typeof value === 'number') CODE_NAMES[value] = name;

export function grpcMetrics(registry: Registry, server: () => GrpcServer | undefined): void {
  scrapedCounter(registry, 'svc_grpc_calls_total', 'gRPC calls answered, by method (Service.Method) and status code name', () => {
    const out: Sample[] = [];
    for (const m of server()?.stats.methods ?? []) {
      for (let code = 0; code < m.codes.length; code++) {
        const value = m.codes[code] as number;
        if (value > 0) out.push({ labels: { method: m.method, code: CODE_NAMES[code] ?? String(code) }, value });
      }
    }
    return out;
  });
  scrapedCounter(registry, 'svc_grpc_calls_abandoned_total', 'gRPC calls whose deadline passed or whose client cancelled before the work was done', () => {
    const s = server();
    return s ? one(s.stats.abandoned) : [];
  });
}
