import t from 'tap';
import { isAppError } from '../../src/errors.js';
import { createWorkerPool, withoutModuleHooks } from '../../src/worker-pool.js';

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
