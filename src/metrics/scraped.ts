// Metrics whose values are read at scrape time from counters the service keeps anyway (plain numbers,
// BucketCounts). prom-client's own Counter and Histogram are updated per event through a label lookup;
// these cost the hot path nothing, and prom-client still registers, formats and escapes them.
import type { Registry } from 'prom-client';
import type { BucketCounts } from './buckets.js';

export type Labels = Record<string, string>;
export interface Sample {
  labels: Labels;
  value: number;
}
export interface HistogramSample {
  labels: Labels;
  buckets: BucketCounts;
}

type MetricType = 'counter' | 'gauge' | 'histogram';
interface Value {
  metricName?: string;
  labels: Labels;
  value: number;
}

/** The shape prom-client's Registry asks of a metric: a name, and get() answering its series. */
abstract class ScrapedMetric {
  readonly aggregator = 'sum';
  constructor(readonly name: string, readonly help: string, readonly type: MetricType) {}

  protected abstract values(): Promise<Value[]> | Value[];

  async get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: await this.values() };
  }

  /** Registry.clear() / resetMetrics() call these on prom-client metrics; ours have no state of their own. */
  reset(): void {}
}

class ScrapedValues extends ScrapedMetric {
  constructor(name: string, help: string, type: 'counter' | 'gauge', private readonly read: () => Sample[] | Promise<Sample[]>) {
    super(name, help, type);
  }

  protected async values(): Promise<Value[]> {
    return (await this.read()).map((s) => ({ labels: s.labels, value: s.value }));
  }
}

class ScrapedHistogram extends ScrapedMetric {
  constructor(name: string, help: string, private readonly read: () => HistogramSample[]) {
    super(name, help, 'histogram');
  }

  protected values(): Value[] {
    const out: Value[] = [];
    for (const { labels, buckets } of this.read()) {
      // Cumulative counts per upper bound, as the exposition format wants them.
      let cumulative = 0;
      for (let i = 0; i < buckets.bounds.length; i++) {
        cumulative += buckets.counts[i] as number;
        out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: String(buckets.bounds[i]) }, value: cumulative });
      }
      out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: buckets.count });
      out.push({ metricName: `${this.name}_sum`, labels, value: buckets.sum });
      out.push({ metricName: `${this.name}_count`, labels, value: buckets.count });
    }
    return out;
  }
}

export function scrapedCounter(registry: Registry, name: string, help: string, read: () => Sample[] | Promise<Sample[]>): void {
  registry.registerMetric(new ScrapedValues(name, help, 'counter', read) as never);
}

export function scrapedGauge(registry: Registry, name: string, help: string, read: () => Sample[] | Promise<Sample[]>): void {
  registry.registerMetric(new ScrapedValues(name, help, 'gauge', read) as never);
}

export function scrapedHistogram(registry: Registry, name: string, help: string, read: () => HistogramSample[]): void {
  registry.registerMetric(new ScrapedHistogram(name, help, read) as never);
}

/** One unlabelled series. */
export const one = (value: number): Sample[] => [{ labels: {}, value }];
