// Owns CPU accounting from /proc: process trees and every PostgreSQL process, as deltas over a window.
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const CLOCK_TICKS = readClockTicks();

function readClockTicks() {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/**
 * One /proc/<pid>/stat. ticks = utime + stime + cutime + cstime: /proc/<pid>/stat sums all threads
 * (so piscina workers are in it), and the reaped-children fields carry the CPU of processes that exited
 * during the window into their parent (PostgreSQL's postmaster reaps its backends), so a start/end
 * difference still counts a backend that came and went between the two snapshots.
 * @param {string} pid
 * @returns {{pid: number, comm: string, ppid: number, ticks: number} | null}
 */
function readStat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited between readdir and read
  }
  // comm may contain spaces and parentheses: it spans from the first '(' to the last ')'.
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' '); // fields[0] is field 3 (state)
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  return { pid: Number(pid), comm: text.slice(open + 1, close), ppid: Number(fields[1]), ticks };
}

/**
 * Voluntary context switches of every thread of a process: each is a thread going to sleep (an event
 * loop waiting in epoll, a worker waiting for work), so their count is the wake-ups the process paid for.
 * @param {number} pid
 */
function readSleeps(pid) {
  let total = 0;
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0; // exited
  }
  for (const tid of tasks) {
    try {
      const m = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'));
      if (m) total += Number(m[1]);
    } catch {
      // the thread ended between readdir and read
    }
  }
  return total;
}

/**
 * CPU ticks and voluntary context switches of a process's threads, summed by thread name (Node names its
 * threads: the main thread, V8's platform workers that run GC tasks, the libuv pool, worker_threads), so
 * a row can show which thread burns and which one is woken per request.
 * @param {number} pid
 * @returns {Record<string, {ticks: number, sleeps: number}>}
 */
function readThreads(pid) {
  /** @type {Record<string, {ticks: number, sleeps: number}>} */
  const out = {};
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // exited
  }
  for (const tid of tasks) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const close = text.lastIndexOf(')');
      const name = tid === String(pid) ? 'main' : text.slice(text.indexOf('(') + 1, close);
      const fields = text.slice(close + 2).split(' ');
      const m = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'));
      const entry = (out[name] ??= { ticks: 0, sleeps: 0 });
      entry.ticks += Number(fields[11]) + Number(fields[12]);
      entry.sleeps += m ? Number(m[1]) : 0;
    } catch {
      // the thread ended between readdir and read
    }
  }
  return out;
}

function readAllStats() {
  const stats = [];
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    const stat = readStat(name);
    if (stat) stats.push(stat);
  }
  return stats;
}

/**
 * @typedef {{wallNs: bigint, ticks: Record<string, number>, sleeps: Record<string, number>, pids: Record<string, number[]>, machineBusyTicks: number, databaseTicks?: Map<number, number>, threads?: Record<string, Record<string, {ticks: number, sleeps: number}>>}} CpuSnapshot
 */

/**
 * Whether a PostgreSQL process is a backend connected to this database: its title is
 * "postgres: <cluster>: <user> <database> <host>(<port>) <state>".
 * @param {number} pid @param {string} database
 */
function servesDatabase(pid, database) {
  try {
    const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return title.includes(` ${database} `);
  } catch {
    return false;
  }
}

/** Busy ticks of the whole machine (all cores) from /proc/stat: total minus idle and iowait. */
function readMachineBusyTicks() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user and nice)
  return fields.slice(0, 8).reduce((a, b) => a + b, 0) - fields[3] - fields[4];
}

/**
 * Snapshot CPU ticks per group: each named root pid with all its descendants, plus group "postgres" (every
 * process whose comm is postgres, wherever it came from) when includePostgres. A PostgreSQL process
 * is only ever counted in "postgres", even when it descends from a root.
 * With postgresDatabase, the PostgreSQL processes serving that database (its backends and autovacuum
 * workers) and the shared writers every commit needs (WAL writer, checkpointer, background writer) are
 * also kept apart as "postgresOwn" (not summed into the others): on a machine where other test suites use
 * the same PostgreSQL, it is the figure their databases do not reach (the postmaster, which absorbs every
 * reaped backend of every database, is left out of it).
 * @param {Record<string, number>} roots group name -> root pid
 * With postgresBackendsOf instead, group "postgres" is only the backends connected to that database (on a
 * machine shared with other databases' work, the one figure that is this server's own), counted per backend.
 * With threads, the root processes' own threads by name as well (see readThreads; children not included).
 * @param {{includePostgres?: boolean, postgresDatabase?: string, postgresBackendsOf?: string, threads?: boolean}} [opts]
 * @returns {CpuSnapshot}
 */
export function takeCpuSnapshot(roots, { includePostgres = true, postgresDatabase, postgresBackendsOf, threads = false } = {}) {
  const stats = readAllStats();
  const machineBusyTicks = readMachineBusyTicks();
  const wallNs = process.hrtime.bigint();
  /** @type {Map<number, number[]>} */
  const children = new Map();
  for (const s of stats) {
    const list = children.get(s.ppid);
    if (list) list.push(s.pid);
    else children.set(s.ppid, [s.pid]);
  }
  const byPid = new Map(stats.map((s) => [s.pid, s]));
  /** @type {Record<string, number>} */
  const ticks = {};
  /** @type {Record<string, number[]>} */
  const pids = {};
  /** @type {Record<string, number>} */
  const sleeps = {};
  for (const [group, root] of Object.entries(roots)) {
    const tree = collectTree(root, children).filter((pid) => byPid.get(pid)?.comm !== 'postgres');
    pids[group] = tree;
    ticks[group] = tree.reduce((sum, pid) => sum + (byPid.get(pid)?.ticks ?? 0), 0);
    sleeps[group] = tree.reduce((sum, pid) => sum + readSleeps(pid), 0);
  }
  const byThread = threads ? Object.fromEntries(Object.entries(roots).map(([group, root]) => [group, readThreads(root)])) : undefined;
  if (includePostgres && postgresBackendsOf) {
    const pg = stats.filter((s) => s.comm === 'postgres' && servesDatabase(s.pid, postgresBackendsOf));
    pids.postgres = pg.map((s) => s.pid);
    ticks.postgres = 0;
    return { wallNs, ticks, sleeps, pids, machineBusyTicks, databaseTicks: new Map(pg.map((s) => [s.pid, s.ticks])), threads: byThread };
  }
  if (includePostgres) {
    const pg = stats.filter((s) => s.comm === 'postgres');
    pids.postgres = pg.map((s) => s.pid);
    ticks.postgres = pg.reduce((sum, s) => sum + s.ticks, 0);
    if (postgresDatabase) ticks.postgresOwn = pg.filter((s) => servesOrWritesFor(s.pid, postgresDatabase)).reduce((sum, s) => sum + s.ticks, 0);
  }
  return { wallNs, ticks, sleeps, pids, machineBusyTicks, threads: byThread };
}

const SHARED_WRITERS = /^postgres: (?:\S+: )?(walwriter|checkpointer|background writer)/;

/** A backend or autovacuum worker of the database ("postgres: user db host(port) state"), or a shared writer. */
/** A backend of that database, or one of the shared writers every commit needs. */
function servesOrWritesFor(/** @type {number} */ pid, /** @type {string} */ database) {
  let cmd;
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return false;
  }
  return SHARED_WRITERS.test(cmd) || cmd.includes(` ${database} `);
}

/**
 * @param {number} root
 * @param {Map<number, number[]>} children
 */
function collectTree(root, children) {
  const out = [];
  const stack = [root];
  while (stack.length) {
    const pid = /** @type {number} */ (stack.pop());
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * CPU seconds and thread sleeps per group between two snapshots, and the wall seconds between them.
 * @param {CpuSnapshot} before
 * @param {CpuSnapshot} after
 */
export function diffCpuSnapshots(before, after) {
  /** @type {Record<string, number>} */
  const cpuSeconds = {};
  for (const group of Object.keys(after.ticks)) {
    cpuSeconds[group] = ((after.ticks[group] ?? 0) - (before.ticks[group] ?? 0)) / CLOCK_TICKS;
  }
  if (after.databaseTicks) {
    // Per backend: one that connected during the window counts whole, one that left is lost (rare: pools).
    let ticks = 0;
    for (const [pid, t] of after.databaseTicks) ticks += t - (before.databaseTicks?.get(pid) ?? 0);
    cpuSeconds.postgres = ticks / CLOCK_TICKS;
  }
  /** @type {Record<string, number>} */
  const sleeps = {};
  for (const group of Object.keys(after.sleeps)) sleeps[group] = (after.sleeps[group] ?? 0) - (before.sleeps[group] ?? 0);
  /** @type {Record<string, Record<string, {cpuSeconds: number, sleeps: number}>>} */
  const threads = {};
  for (const [group, names] of Object.entries(after.threads ?? {})) {
    threads[group] = {};
    for (const [name, t] of Object.entries(names)) {
      const was = before.threads?.[group]?.[name];
      threads[group][name] = { cpuSeconds: (t.ticks - (was?.ticks ?? 0)) / CLOCK_TICKS, sleeps: t.sleeps - (was?.sleeps ?? 0) };
    }
  }
  const measured = Object.values(cpuSeconds).reduce((a, b) => a + b, 0);
  // CPU used by anything else (another test suite, a build): a large value means a contended run.
  const otherCpuSeconds = Math.max(0, (after.machineBusyTicks - before.machineBusyTicks) / CLOCK_TICKS - measured);
  return { wallSeconds: Number(after.wallNs - before.wallNs) / 1e9, cpuSeconds, sleeps, threads, otherCpuSeconds };
}

/**
 * Measure a window: snapshot now, and return stop() giving the delta.
 * @param {Record<string, number>} roots
 * @param {{includePostgres?: boolean}} [opts]
 */
export function startCpuWindow(roots, opts) {
  const before = takeCpuSnapshot(roots, opts);
  return { stop: () => diffCpuSnapshots(before, takeCpuSnapshot(roots, opts)) };
}

export const clockTicksPerSecond = CLOCK_TICKS;
