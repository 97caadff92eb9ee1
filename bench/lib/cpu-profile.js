// Reads a V8 .cpuprofile for one measured window: the microseconds each function and each file spent on
// the sampled thread between window.start and window.end (start-up, set-up and shutdown left out), and how
// to print them per message. Shared by the profile-* scripts.

/**
 * @param {{startTime: number, samples: number[], timeDeltas: number[], nodes: {id: number, callFrame: {functionName: string, url: string, lineNumber: number}}[]}} profile
 * @param {{start: number, end: number}} window profile clock (µs), as the scripts record it
 */
export function windowTimes(profile, window) {
  /** @type {Map<number, number>} */
  const dt = new Map();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at >= window.start && at <= window.end) dt.set(profile.samples[i], (dt.get(profile.samples[i]) ?? 0) + delta);
  }
  /** @type {Map<string, number>} */
  const self = new Map();
  /** @type {Map<string, number>} */
  const byFile = new Map();
  let total = 0;
  for (const node of profile.nodes) {
    const us = dt.get(node.id) ?? 0;
    total += us;
    const cf = node.callFrame;
    const where = cf.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/');
    const key = `${cf.functionName || '(anon)'} ${where}:${cf.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + us);
    const f = where.split(':')[0] || cf.functionName;
    byFile.set(f, (byFile.get(f) ?? 0) + us);
  }
  return { self, byFile, total };
}

/** Prints the heaviest files and functions, per message of `messages`. */
export function printWindowTimes(/** @type {ReturnType<typeof windowTimes>} */ times, /** @type {number} */ messages, files = 30, functions = 50) {
  const per = (/** @type {number} */ us) => `${(us / messages).toFixed(2)} µs/msg ${((us / times.total) * 100).toFixed(1)}%`;
  console.log('--- by file');
  for (const [k, v] of [...times.byFile].sort((a, b) => b[1] - a[1]).slice(0, files)) console.log(`${per(v).padEnd(26)} ${k}`);
  console.log('--- by function');
  for (const [k, v] of [...times.self].sort((a, b) => b[1] - a[1]).slice(0, functions)) console.log(`${per(v).padEnd(26)} ${k}`);
}
