// Seeded input generation for the hostile-input tests: one number replays a run (FUZZ_SEED), and each
// test prints the seed it used in its name.

/** The run's seed: FUZZ_SEED when set, else the clock. */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);

/** mulberry32: small, fast, good enough to spread inputs, and replayable from one number. */
export function generator(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)));
  /** The buffer with one to `most` of: a byte flipped, a run of random bytes inserted, the end cut off. */
  const mutate = (buf: Buffer, most = 3): Buffer => {
    let out = Buffer.from(buf);
    for (let k = 1 + int(most); k > 0 && out.length > 0; k--) {
      const at = int(out.length);
      const roll = next();
      if (roll < 0.6) out[at] = int(256);
      else if (roll < 0.85) out = Buffer.concat([out.subarray(0, at), bytes(1 + int(8)), out.subarray(at)]);
      else out = out.subarray(0, at);
    }
    return out;
  };
  return { next, int, pick, bytes, mutate };
}
export type Generator = ReturnType<typeof generator>;
