// Shared settings of the generated hostile-input suite (fast-check): one seed for every property, so a run
// replays from FUZZ_SEED; deterministic by default (CI runs the same cases each time), and FUZZ_RUNS scales
// the number of cases (FUZZ_RUNS=10 for a long local hunt, below 1 for a quick look).
import fc from 'fast-check';
import { isAppError } from '../../../src/errors.js';

export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 35_035);
const SCALE = Number(process.env.FUZZ_RUNS ?? 1);

/** fast-check parameters for `numRuns` cases (scaled), every property on the run's seed. */
export function params<T>(numRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  return { seed: FUZZ_SEED, numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...extra };
}

/** The only acceptable way to refuse input: an AppError of kind INVALID_INPUT (or another client kind when given). */
export function refusedCleanly(err: unknown, kinds: readonly string[] = ['INVALID_INPUT']): boolean {
  return isAppError(err) && kinds.includes(err.kind);
}

/** Runs fn; returns 'ok' with its value, or 'refused' for a clean refusal; anything else is rethrown (the property fails). */
export function outcome<T>(fn: () => T, kinds?: readonly string[]): { ok: true; value: T } | { ok: false; err: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    if (refusedCleanly(err, kinds)) return { ok: false, err };
    throw err;
  }
}

/** Strings with the characters that broke parsers before: NUL, lone surrogates, dots, '$', '%', quotes, long runs. */
export const nastyString = (): fc.Arbitrary<string> => fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom('', '\u0000', 'a\u0000b', '\ud800', 'x\udfff', '..', '.', '$', '$body', '$body.', '$.', '__proto__', 'constructor', 'prototype',
    '%zz', '%00', "'", '"', '\\', '*', '#', '+', '/', '//', 'x'.repeat(5000)),
  fc.array(fc.constantFrom('a', '.', '$', '_', '0', '-', 'é', '\u0000', '/', '#', '+', '%'), { maxLength: 12 }).map((a) => a.join('')),
);

/** JSON values of every type, nasty keys included, a few levels deep. */
export const nastyJson = (): fc.Arbitrary<unknown> => fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -0, 1, -1, 1e308, -1e308, 5e-324, 2 ** 53, 0.5),
    fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), nastyString(),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(nastyString(), tie('value'), { maxKeys: 4 })),
})).value;

/** Mutations of a byte string: flips, inserted runs, cuts, duplicated slices (how length fields get lied about). */
export const mutated = (base: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Buffer> => fc.tuple(base, fc.array(fc.tuple(fc.nat(), fc.nat(255), fc.nat(3), fc.uint8Array({ minLength: 1, maxLength: 8 })), { minLength: 1, maxLength: 4 }))
  .map(([bytes, edits]) => {
    let out = Buffer.from(bytes);
    for (const [at0, byte, kind, run] of edits) {
      if (out.length === 0) break;
      const at = at0 % out.length;
      if (kind === 0) out[at] = byte;
      else if (kind === 1) out = Buffer.concat([out.subarray(0, at), run, out.subarray(at)]);
      else if (kind === 2) out = out.subarray(0, at);
      else out = Buffer.concat([out.subarray(0, at), out.subarray(at, at + 1 + (byte % 16)), out.subarray(at)]);
    }
    return out;
  });
