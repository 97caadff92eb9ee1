// The piscina worker pool (signing, CRLs, OCSP): threads, queue and utilisation.
import type { Registry } from 'prom-client';
import type { WorkerPool } from '../worker-pool.js';
import { one, scrapedCounter, scrapedGauge } from './scraped.js';

export function workerMetrics(registry: Registry, workers: WorkerPool): void {
  scrapedGauge(registry, 'svc_worker_threads', 'Worker threads running now', () => one(workers.stats.threads));
  scrapedGauge(registry, 'svc_worker_threads_max', 'Most worker threads the pool runs (SVC_WORKER_THREADS)', () => one(workers.size));
  scrapedGauge(registry, 'svc_worker_queue_depth', 'Tasks waiting for a worker thread (refused past SVC_WORKER_MAX_QUEUE)', () => one(workers.stats.queued));
  scrapedGauge(registry, 'svc_worker_utilization', 'Share of the pool\'s capacity spent running tasks since it started (piscina utilization, 0 to 1)', () => one(workers.stats.utilization));
  scrapedCounter(registry, 'svc_worker_tasks_completed_total', 'Worker tasks completed', () => one(workers.stats.completed));
}
