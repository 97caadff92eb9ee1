// /health/live probed while some work runs in the service: the process must keep answering meanwhile.

/** /health/live answer times (ms), probed one after another until `work` settles (at least once). */
async function probeDuring<T>(base: string, work: Promise<T>): Promise<{ result: T; latencies: number[] }> {
  let done = false;
  const settled = work.finally(() => {
    done = true;
  });
  const latencies: number[] = [];
  do {
    const start = performance.now();
    const res = await fetch(`${base}/health/live`);
    await res.arrayBuffer();
    latencies.push(performance.now() - start);
    if (res.status !== 200) throw new Error(`/health/live answered ${res.status}`);
  } while (!done);
  return { result: await settled, latencies };
}

// Kept so the spinning in starvation() is not optimised away.
let spun = 0;

/**
 * How many times longer than its CPU time a fixed piece of work takes in this process now: 1 on an idle
 * machine, more while other processes hold the cores (these machines are shared by several test runs).
 */
export function starvation(cpuMs = 20): number {
  const cpu = process.cpuUsage();
  const start = performance.now();
  let x = 0;
  while (process.cpuUsage(cpu).user < cpuMs * 1000) x += Math.sqrt(x + 1);
  spun = x;
  return Math.max(1, (performance.now() - start) / cpuMs);
}

/**
 * The slowest /health/live answer while `work()` runs, in the best of `runs` runs, against `limitMs` of the
 * service's own time: scaled by the starvation measured just before each run (1 when the machine is idle),
 * since a probe another process delayed says nothing of the service, while a stall the work causes
 * itself shows at any load. The test client runs in the service's process, so its own work counts too.
 */
export async function slowestHealthDuring<T>(base: string, work: () => Promise<T>, limitMs: number, runs = 3):
Promise<{ result: T; ok: boolean; tried: string[] }> {
  const tried: string[] = [];
  let result: T | undefined;
  for (let i = 0; i < runs; i++) {
    const factor = starvation();
    const probed = await probeDuring(base, work());
    result = probed.result;
    const slowest = Math.max(...probed.latencies);
    const allowed = limitMs * factor;
    tried.push(`${slowest.toFixed(1)} ms of ${probed.latencies.length} probes, allowed ${allowed.toFixed(0)} ms (starvation ${factor.toFixed(2)})`);
    if (slowest < allowed) return { result, ok: true, tried };
  }
  return { result: result as T, ok: false, tried };
}
