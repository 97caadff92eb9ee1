// Scenario: in-process authorization decisions on a realistic policy set (10k entities, 1k channels,
// nested object groups, 100 roles, 20k blocks, some conditions and denies): our engine with a warm
// decision memo ("cached"), without the memo but with cached facts ("uncached"), and fully cold (every
// fact from PostgreSQL), then the same policy set in @cedar-policy/cedar-wasm (pre-parsed policy set,
// statefulIsAuthorized) and casbin (RBAC with domains), in this process, in this run.
import { createRequire } from 'node:module';
import { buildWorld, casbinRules, CASBIN_MODEL, cedarEntitySlices, cedarPolicies, SIZES } from '../lib/authz-dataset.js';
import { createWorldDatabase, startAuthzInstance } from '../lib/authz-instance.js';

const require = createRequire(import.meta.url);
const SAMPLE = 500;

/** Sequential calls for a window; per-call latency into the histogram; CPU of this process + PostgreSQL. */
async function measure(ctx, label, count, call, { seconds = ctx.durationSeconds, warmup = ctx.warmupSeconds } = {}) {
  const hist = ctx.createHistogram();
  let i = 0;
  const warmEnd = performance.now() + warmup * 1000;
  while (performance.now() < warmEnd) await call(i++ % count);
  const window = ctx.startCpuWindow();
  const end = performance.now() + seconds * 1000;
  let requests = 0;
  let errors = 0;
  while (performance.now() < end) {
    // Batches of 64 between clock reads keep the clock off the hot path for the cheapest engines.
    for (let b = 0; b < 64; b++) {
      const t0 = process.hrtime.bigint();
      try {
        await call(i++ % count);
      } catch {
        errors++;
      }
      hist.recordValue(Math.max(1, Number(process.hrtime.bigint() - t0) / 1000));
      requests++;
    }
  }
  const { wallSeconds, cpuSeconds } = window.stop();
  const cpu = Object.values(cpuSeconds).reduce((a, b) => a + b, 0);
  const r = { engine: label, requests, wallSeconds, reqPerSec: requests / wallSeconds, p50Us: hist.getValueAtPercentile(50), p99Us: hist.getValueAtPercentile(99), maxUs: hist.maxValue, errors, cpuSeconds, cpuUsPerDecision: (cpu / requests) * 1e6 };
  console.error(`bench: authz-engine ${label}: ${Math.round(r.reqPerSec)} decisions/s, p50 ${r.p50Us} µs, p99 ${r.p99Us} µs`);
  return r;
}

async function startOurs(world) {
  const db = await createWorldDatabase(world);
  const instance = await startAuthzInstance(db.url);
  return {
    authz: instance.authz,
    async stop() {
      await instance.stop();
      await db.drop();
    },
  };
}

export default {
  name: 'authz-engine',
  description: `in-process decisions (${SIZES.tenants * SIZES.entitiesPerTenant} entities, ${SIZES.tenants * SIZES.channelsPerTenant} channels, ${SIZES.tenants * SIZES.rolesPerTenant} roles, ${SIZES.tenants * SIZES.rolesPerTenant * SIZES.blocksPerRole} blocks): ours cached vs uncached vs cold vs cedar-wasm vs casbin`,
  server: 'none',
  async run(ctx) {
    const world = buildWorld();
    const ours = await startOurs(world);
    try {
      const requests = world.requests.map((r) => ({ subjectId: r.subjectId, action: r.action, object: { kind: 'resource', id: r.channelId } }));
      const n = requests.length;
      // Load every subject's grants and every channel's facts once (not measured), then count outcomes.
      for (let i = 0; i < n; i += 100) await Promise.all(requests.slice(i, i + 100).map((r) => ours.authz.authorize(r)));
      let allowed = 0;
      for (const r of requests.slice(0, SAMPLE)) if ((await ours.authz.authorize(r)).allowed) allowed++;
      const cached = await measure(ctx, 'ours cached', n, (i) => ours.authz.authorize(requests[i]));
      const uncached = await measure(ctx, 'ours uncached (memo off, facts cached)', n, (i) => ours.authz.engine.authorizeUncached(requests[i]));
      const cold = await measure(ctx, 'ours cold (subject re-read from PostgreSQL)', n, async (i) => {
        await ours.authz.invalidate({ kind: 'subjects', entityIds: [requests[i].subjectId] });
        return ours.authz.authorize(requests[i]);
      }, { seconds: Math.min(3, ctx.durationSeconds), warmup: 0.5 });

      // Peers evaluate every policy of their set on each call (neither indexes policies), so besides the
      // whole set each is also measured partitioned per tenant, the way a deployment would shard it.
      const tenantOf = new Map(world.entities.map((e) => [e.id, e.tenantId]));
      const cedar = require('@cedar-policy/cedar-wasm/nodejs');
      const preparse = (id, policies) => {
        const parsed = cedar.preparsePolicySet(id, { staticPolicies: cedarPolicies(policies) });
        if (parsed.type !== 'success') throw new Error(`cedar policy set: ${JSON.stringify(parsed.errors).slice(0, 500)}`);
      };
      preparse('bench-all', world);
      for (const t of world.tenants) preparse(`bench-${t.id}`, { roles: world.roles.filter((r) => r.tenantId === t.id) });
      const slices = cedarEntitySlices(world);
      const callsAll = slices.map((c) => ({ ...c, preparsedPolicySetId: 'bench-all' }));
      const callsTenant = slices.map((c, i) => ({ ...c, preparsedPolicySetId: `bench-${tenantOf.get(world.requests[i].subjectId)}` }));
      // Outcomes are compared on a sample: a full pass over the requests takes minutes for the slow peers.
      let cedarAllowed = 0;
      for (const c of callsTenant.slice(0, SAMPLE)) {
        const answer = cedar.statefulIsAuthorized(c);
        if (answer.type !== 'success') throw new Error(`cedar: ${JSON.stringify(answer.errors).slice(0, 500)}`);
        if (answer.response.decision === 'allow') cedarAllowed++;
      }
      const cedarAll = await measure(ctx, 'cedar-wasm, one pre-parsed set (20k)', n, (i) => cedar.statefulIsAuthorized(callsAll[i]));
      const cedarTenant = await measure(ctx, 'cedar-wasm, pre-parsed set per tenant', n, (i) => cedar.statefulIsAuthorized(callsTenant[i]));

      const { newEnforcer, newModelFromString } = require('casbin');
      const enforcerOf = async (rules) => {
        const e = await newEnforcer(newModelFromString(CASBIN_MODEL));
        await e.addNamedPolicies('p', rules.p);
        await e.addNamedGroupingPolicies('g', rules.g);
        await e.addNamedGroupingPolicies('g2', rules.g2);
        return e;
      };
      const all = casbinRules(world);
      const enforcer = await enforcerOf(all);
      const perTenant = new Map();
      for (const t of world.tenants) {
        const roles = world.roles.filter((r) => r.tenantId === t.id);
        const sub = { ...world, roles, assignments: world.assignments.filter((a) => a.tenantId === t.id) };
        perTenant.set(t.id, await enforcerOf(casbinRules(sub)));
      }
      let casbinAllowed = 0;
      for (const r of all.requests.slice(0, SAMPLE)) if (perTenant.get(r[1]).enforceSync(...r)) casbinAllowed++;
      const casbinAll = await measure(ctx, 'casbin RBAC+domains, one model (37k rules)', n, (i) => enforcer.enforceSync(...all.requests[i]));
      const casbinTenant = await measure(ctx, 'casbin RBAC+domains, model per tenant', n, (i) => perTenant.get(all.requests[i][1]).enforceSync(...all.requests[i]));
      const cedarResult = cedarTenant;
      const casbinResult = casbinTenant;

      const ratio = (a, b) => a.reqPerSec / b.reqPerSec;
      const ratios = {
        cached_vs_cedar: ratio(cached, cedarResult), cached_vs_casbin: ratio(cached, casbinResult),
        uncached_vs_cedar: ratio(uncached, cedarResult), uncached_vs_casbin: ratio(uncached, casbinResult),
      };
      const targets = {
        'cached >= 3x cedar': ratios.cached_vs_cedar >= 3, 'cached >= 3x casbin': ratios.cached_vs_casbin >= 3,
        'uncached >= cedar': ratios.uncached_vs_cedar >= 1, 'uncached >= casbin': ratios.uncached_vs_casbin >= 1,
      };
      console.log('\nauthz-engine: in-process decisions, same policy set, same process, same run');
      for (const r of [cached, uncached, cold, cedarAll, cedarTenant, casbinAll, casbinTenant]) {
        console.log(`  ${r.engine.padEnd(40)} ${String(Math.round(r.reqPerSec)).padStart(9)} /s  p50 ${String(r.p50Us).padStart(6)} µs  p99 ${String(r.p99Us).padStart(6)} µs  cpu ${r.cpuUsPerDecision.toFixed(2)} µs/decision`);
      }
      console.log('  ratios against the faster (per-tenant) variant of each peer');
      console.log(`  ratios: ${Object.entries(ratios).map(([k, v]) => `${k} ${v.toFixed(1)}x`).join(', ')}`);
      console.log(`  targets: ${Object.entries(targets).map(([k, v]) => `${k} ${v ? 'PASS' : 'MISS'}`).join(', ')}`);
      console.log(`  allowed of the first ${SAMPLE} requests: ours ${allowed}, cedar ${cedarAllowed}, casbin ${casbinAllowed} (casbin's model carries no ABAC conditions)\n`);
      return {
        requests: cached.requests, wallSeconds: cached.wallSeconds, p50Us: cached.p50Us, p99Us: cached.p99Us, maxUs: cached.maxUs,
        errors: cached.errors, serverCpuSeconds: cached.cpuSeconds,
        engines: { cached, uncached, cold, cedarAll, cedarTenant, casbinAll, casbinTenant }, ratios, targets,
        allowed: { ours: allowed, cedar: cedarAllowed, casbin: casbinAllowed, of: SAMPLE }, sizes: { ...SIZES, blocks: world.blockCount, groups: world.groups.length }, cacheStats: ours.authz.stats(),
      };
    } finally {
      await ours.stop();
    }
  },
};
