// Scenario: how soon a grant changed through one instance changes the decisions of another. Two engines
// on one seeded database (the authz-engine world) stand for two service instances. Each sample revokes
// (or restores) a subject's role assignments through A, calls A's invalidate, and polls B's decision
// until it flips: the time from the invalidate call to B's new decision, which includes B reloading the
// subject from PostgreSQL. Interleaved with it, the floor: a bare NOTIFY from A's hub to B's, timed from
// the call to B's handler. The README's bound is 100 ms at p99; the ratio says what invalidation adds
// to the database's own delivery.
import { buildWorld } from '../lib/authz-dataset.js';
import { createWorldDatabase, startAuthzInstance } from '../lib/authz-instance.js';

const SUBJECTS = 64;
const GIVE_UP_MS = 5000;
const PING_TOPIC = 'bench.ping';

/** Subjects whose first request is allowed: revoking their assignments must turn it into a denial. */
async function pickQuestions(authz, world) {
  const seen = new Set();
  const questions = [];
  for (const r of world.requests) {
    if (questions.length === SUBJECTS) break;
    if (seen.has(r.subjectId)) continue;
    seen.add(r.subjectId);
    const question = { subjectId: r.subjectId, action: r.action, object: { kind: 'resource', id: r.channelId } };
    if ((await authz.authorize(question)).allowed) questions.push(question);
  }
  if (questions.length < SUBJECTS) throw new Error(`only ${questions.length} allowed subjects in the world`);
  return questions;
}

/** Polls `authz` on every turn of the event loop (I/O runs between polls) until the decision is `want`. */
async function decisionBecomes(authz, question, want) {
  const started = performance.now();
  while ((await authz.authorize(question)).allowed !== want) {
    if (performance.now() - started > GIVE_UP_MS) return false;
    await new Promise((r) => setImmediate(r));
  }
  return true;
}

export default {
  name: 'authz-propagation',
  description: 'a grant revoked/restored through instance A: time until instance B decides otherwise, vs a bare NOTIFY A -> B',
  server: 'none',
  target: { p99Us: 100_000 },
  async run(ctx) {
    const world = buildWorld();
    const db = await createWorldDatabase(world);
    const a = await startAuthzInstance(db.url);
    const b = await startAuthzInstance(db.url);
    /** @type {((payload: unknown) => void) | null} */
    let pinged = null;
    const unsubscribe = b.hub.subscribe(PING_TOPIC, (payload) => pinged?.(payload));
    try {
      const questions = await pickQuestions(a.authz, world);
      const saved = new Map();
      /** Milliseconds from A's NOTIFY to B's handler; null when it never came. */
      const ping = async (i) => {
        let timer;
        const arrived = new Promise((resolve) => {
          pinged = (p) => p === i && resolve(true);
          timer = setTimeout(resolve, GIVE_UP_MS, false);
        });
        const t0 = performance.now();
        await a.hub.notify(PING_TOPIC, i);
        const came = await arrived;
        clearTimeout(timer);
        return came ? performance.now() - t0 : null;
      };
      /** Revokes (even rounds) or restores (odd rounds) the subject's assignments; null when B never followed. */
      const flip = async (question, revoke) => {
        const id = question.subjectId;
        await b.authz.authorize(question); // B holds the current decision, as a busy instance would
        if (revoke) saved.set(id, await a.sql`delete from role_assignments where entity_id = ${id} returning *`);
        else await a.sql`insert into role_assignments ${a.sql(saved.get(id))}`;
        const t0 = performance.now();
        await a.authz.invalidate({ kind: 'subjects', entityIds: [id] });
        return (await decisionBecomes(b.authz, question, !revoke)) ? performance.now() - t0 : null;
      };

      const propagation = ctx.createHistogram();
      // A revoked subject reloads with no grants; a restored one with its role's grant of 200 blocks (their
      // contents only when B holds no policy compiled from that role).
      const byKind = [ctx.createHistogram(), ctx.createHistogram()];
      const notify = ctx.createHistogram();
      let samples = 0;
      let errors = 0;
      const sample = async (i, record) => {
        const question = questions[Math.floor(i / 2) % SUBJECTS];
        const pingMs = await ping(i);
        const flipMs = await flip(question, i % 2 === 0);
        if (!record) return;
        if (pingMs === null) errors++;
        else notify.recordValue(Math.max(1, Math.round(pingMs * 1000)));
        if (flipMs === null) errors++;
        else {
          const us = Math.max(1, Math.round(flipMs * 1000));
          propagation.recordValue(us);
          byKind[i % 2].recordValue(us);
        }
        samples++;
      };
      // Whole revoke/restore pairs, so every subject ends as seeded.
      let i = 0;
      const warmEnd = performance.now() + ctx.warmupSeconds * 1000;
      while (performance.now() < warmEnd || i % 2) await sample(i++, false);
      const window = ctx.startCpuWindow();
      const end = performance.now() + ctx.durationSeconds * 1000;
      while (performance.now() < end || i % 2) await sample(i++, true);
      const { wallSeconds, cpuSeconds } = window.stop();

      const p = (h, q) => h.getValueAtPercentile(q);
      const ratio = p(propagation, 50) / p(notify, 50);
      console.log('\nauthz-propagation: revoke/restore through A until B decides otherwise, same database, same run');
      console.log(`  invalidation A -> B decision   p50 ${String(p(propagation, 50)).padStart(7)} µs  p99 ${String(p(propagation, 99)).padStart(7)} µs  max ${propagation.maxValue} µs  (${samples} samples, ${errors} where B never followed or a NOTIFY never came)`);
      console.log(`    of which revokes              p50 ${String(p(byKind[0], 50)).padStart(7)} µs  p99 ${String(p(byKind[0], 99)).padStart(7)} µs  (B reloads a subject without bindings)`);
      console.log(`    of which restores             p50 ${String(p(byKind[1], 50)).padStart(7)} µs  p99 ${String(p(byKind[1], 99)).padStart(7)} µs  (B reloads the role's grant of 200 blocks)`);
      console.log(`  bare NOTIFY A -> B handler     p50 ${String(p(notify, 50)).padStart(7)} µs  p99 ${String(p(notify, 99)).padStart(7)} µs  max ${notify.maxValue} µs`);
      console.log(`  ratio: propagation p50 / NOTIFY p50 ${ratio.toFixed(2)}x\n`);
      return {
        requests: samples, wallSeconds, p50Us: p(propagation, 50), p99Us: p(propagation, 99), maxUs: propagation.maxValue,
        errors, serverCpuSeconds: cpuSeconds,
        revokes: { p50Us: p(byKind[0], 50), p99Us: p(byKind[0], 99) }, restores: { p50Us: p(byKind[1], 50), p99Us: p(byKind[1], 99) },
        notify: { p50Us: p(notify, 50), p99Us: p(notify, 99), maxUs: notify.maxValue }, ratio,
      };
    } finally {
      unsubscribe();
      await a.stop();
      await b.stop();
      await db.drop();
    }
  },
};
