// Waiting in tests for what happens asynchronously (a cache invalidated, a writer recovered, a message
// delivered): poll a condition with a deadline instead of sleeping a fixed time and hoping.

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it holds; throws, naming `what`, when `ms` passed first. */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms = 5000, what = 'condition'): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`${what} not reached in ${ms} ms`);
    await sleep(20);
  }
}
