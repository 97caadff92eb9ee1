// Piscina's entry for the task threads. It is CommonJS on purpose. Piscina loads its file with require()
// first, and on Node 20 a thread terminated while require() of an ES module is instantiating it aborts
// the whole process ("v8::Module::IsGraphAsync must be used on an instantiated module"): the pool
// terminates threads at close and when an abort frees a thread stuck in a native call, and a thread may
// still be loading its tasks then. import() has no such window, so the tasks (an ES module) are loaded
// with import(), once per thread, from the moment the thread starts.
const loading = import('./index.js');
// Observed here so that a thread no task ever reaches does not die of an unhandled rejection; a task that
// awaits `loading` still gets the error.
loading.catch(() => undefined);

type Tasks = Awaited<typeof loading>;
type TaskName = { [K in keyof Tasks]: Tasks[K] extends (input: never) => unknown ? K : never }[keyof Tasks];

/** The one handler piscina calls: `{ task, input }` names an export of workers/index and its input. */
export = async function runTask(message: { task: TaskName; input: unknown }): Promise<unknown> {
  const tasks = await loading;
  const run = tasks[message.task] as ((input: unknown) => unknown) | undefined;
  // A programming error, not an input's: thrown, it reaches the caller as INTERNAL.
  if (typeof run !== 'function') throw new Error(`no worker task named ${String(message.task)}`);
  return run(message.input);
};
