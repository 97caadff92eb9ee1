// A histogram's state as plain numbers, filled on hot paths without allocating or looking anything up:
// one comparison loop over a handful of bounds and three number writes. The metrics module turns it into
// Prometheus histogram series at scrape time (scraped.ts); code that counts needs no prom-client.

/** Seconds: from a cached authz check (tens of µs) to a request that waited for a slow database. */
export const LATENCY_SECONDS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class BucketCounts {
  /** counts[i]: observations <= bounds[i] and > bounds[i - 1]; the last slot holds those above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    const counts = this.counts;
    counts[i] = (counts[i] as number) + 1;
    this.sum += value;
    this.count++;
  }
}
