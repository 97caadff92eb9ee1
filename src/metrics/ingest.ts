// Message ingest (HTTP, MQTT, CoAP share it): group-commit batches, commit latency, the writer's queue.
import type { Registry } from 'prom-client';
import type { MessagingService } from '../messaging/index.js';
import { one, scrapedCounter, scrapedGauge, scrapedHistogram } from './scraped.js';

export function ingestMetrics(registry: Registry, messaging: MessagingService): void {
  const { batches } = messaging;
  scrapedHistogram(registry, 'svc_ingest_batch_rows', 'Messages per committed batch (one INSERT each)', () => [{ labels: {}, buckets: batches.rows }]);
  scrapedHistogram(registry, 'svc_ingest_commit_duration_seconds', 'Seconds from a batch\'s start to its commit', () => [{ labels: {}, buckets: batches.commitSeconds }]);
  scrapedGauge(registry, 'svc_ingest_queue_depth', 'Messages waiting for a batch or being written now', () => one(messaging.stats().queued));
  scrapedGauge(registry, 'svc_ingest_queue_capacity', 'Most messages the writer holds (SVC_MESSAGING_MAX_QUEUE); beyond it publishes answer 503', () => one(messaging.settings.writer.maxQueue));
  scrapedGauge(registry, 'svc_ingest_queue_high_water', 'Most messages ever waiting at once since the start', () => one(messaging.stats().highWater));
  scrapedCounter(registry, 'svc_ingest_publishes_total', 'Publishes by outcome: acknowledged (stored), rejected (auth, authz, validation, queue full), failed (database unavailable)', () => {
    const s = messaging.stats();
    return [
      { labels: { outcome: 'acknowledged' }, value: s.acknowledged },
      { labels: { outcome: 'rejected' }, value: s.rejected },
      { labels: { outcome: 'failed' }, value: s.failed },
    ];
  });
  scrapedCounter(registry, 'svc_ingest_messages_stored_total', 'Messages committed to the messages table', () => one(messaging.stats().stored));
  scrapedCounter(registry, 'svc_ingest_received_bytes_total', 'Payload bytes of publishes that reached the pipeline', () => one(messaging.stats().received.bytes));
}
