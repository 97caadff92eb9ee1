import { createRequire } from 'node:module';
import t from 'tap';
import { isAppError } from '../../src/errors.js';
import { createWorkerPool, WORKER_ENTRY, withoutModuleHooks } from '../../src/worker-pool.js';

t.test('tasks run on worker threads; a full queue answers RATE_LIMITED', async (t) => {
  const pool = createWorkerPool({ threads: 1, maxQueue: 2 });
  t.teardown(() => pool.close());
  const one = await pool.run<{ ok: boolean; at: number; threadId: number }>('ping', { at: 42 });
  t.same({ ok: one.ok, at: one.at }, { ok: true, at: 42 });
  t.ok(one.threadId > 0, 'ran off the main thread');

  const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => pool.run('ping', { at: i })));
  const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
  t.ok(rejected.length > 0, `${rejected.length} of 50 refused`);
  for (const r of rejected) t.ok(isAppError(r.reason) && r.reason.kind === 'RATE_LIMITED');
  t.ok(results.some((r) => r.status === 'fulfilled'), 'the rest ran');
});

t.test('worker threads get the process flags without its module hooks', async (t) => {
  t.same(withoutModuleHooks([
    '--enable-source-maps', '--import=file:///x/ts.mjs', '--import', 'file:///x/mock.mjs', '-r', 'ts-node/register',
    '--require=./hook.cjs', '--loader', 'ts-node/esm', '--experimental-loader=./l.mjs', '--max-old-space-size=512',
  ]), ['--enable-source-maps', '--max-old-space-size=512']);
  t.same(withoutModuleHooks([]), []);
});

// Node 20 aborts the whole process when a thread is terminated while require() of an ES module is
// instantiating it, and the pool terminates its threads at close whatever they are doing. Piscina loads
// the entry with require(), so the entry must load no ES module through require(): nothing but itself may
// enter require's cache (the task modules come through import(), which has no such window).
t.test("the threads' entry loads the tasks without require()", async (t) => {
  const require = createRequire(import.meta.url);
  const before = new Set(Object.keys(require.cache));
  const runTask = require(WORKER_ENTRY) as (message: { task: string; input: unknown }) => Promise<{ ok: boolean; at: number }>;
  const required = Object.keys(require.cache).filter((file) => !before.has(file));
  t.same(required, [WORKER_ENTRY], 'only the entry itself, a CommonJS file');
  t.match(await runTask({ task: 'ping', input: { at: 7 } }), { ok: true, at: 7 }, 'and it runs the tasks, loaded by import()');
});

t.test('an unknown task name is an internal error, not a hang', async (t) => {
  const pool = createWorkerPool({ threads: 1, maxQueue: 1 });
  t.teardown(() => pool.close());
  const err = await pool.run('noSuchTask', {}).catch((e: unknown) => e);
  t.ok(isAppError(err) && err.kind === 'INTERNAL');
});
