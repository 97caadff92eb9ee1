// Readiness: named component checks (database, migrations, workers, notifications...) combined into one
// status; the anonymous report shows states only, the details (messages, settings) go to platform readers.
export type ComponentStatus = 'ok' | 'disabled' | 'degraded' | 'error';
export interface ComponentCheck {
  status: ComponentStatus;
  message?: string;
}
export type Check = () => Promise<ComponentCheck> | ComponentCheck;
/** The service's readiness as one component: how the other checks came out. */
export interface Outcome {
  ready: boolean;
  /** Critical components in error (the reason the service is not ready). */
  failing: string[];
}

export interface HealthReport {
  ready: boolean;
  body: Record<string, unknown>;
}

export interface Health {
  /** Adds a component; `critical` ones make the service not ready when they fail. */
  register(name: string, check: Check, options?: { critical?: boolean }): void;
  /**
   * Facts shown to platform readers (pool sizes, rate-limit policies, key ids...); `public` ones (a
   * listener's readiness) also in the anonymous report.
   */
  describe(name: string, facts: () => unknown, options?: { public?: boolean }): void;
  /**
   * A component computed from the others' outcome after they ran (the HTTP listener's readiness is the
   * service's); it does not count towards readiness itself.
   */
  derive(name: string, fn: (outcome: Outcome) => ComponentCheck): void;
  /** The anonymous report (GET /health): the overall status and each component's status, nothing else. */
  report(): Promise<HealthReport>;
  /** Everything: components with their messages, every fact, version and revision (GraphQL systemStatus). */
  details(): Promise<HealthReport>;
}

const CHECK_TIMEOUT_MS = 2000;

async function runCheck(check: Check): Promise<ComponentCheck> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<ComponentCheck>((resolve) => {
    timer = setTimeout(() => resolve({ status: 'error', message: `no answer within ${CHECK_TIMEOUT_MS} ms` }), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([Promise.resolve().then(check), timeout]);
  } catch (err) {
    return { status: 'error', message: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

export function createHealth(build: { version: string; revision: string | null }): Health {
  const checks = new Map<string, { check: Check; critical: boolean }>();
  const facts = new Map<string, { fn: () => unknown; public: boolean }>();
  const derived = new Map<string, (outcome: Outcome) => ComponentCheck>();

  async function run(full: boolean): Promise<HealthReport> {
    const entries = [...checks.entries()];
    const results = await Promise.all(entries.map(([, c]) => runCheck(c.check)));
    const components: Record<string, unknown> = {};
    // A message can name a migration, a key setting or an internal error: platform readers only.
    const show = (result: ComponentCheck) => (full ? result : { status: result.status });
    let degraded = false;
    const failing: string[] = [];
    entries.forEach(([name, c], i) => {
      const result = results[i] as ComponentCheck;
      components[name] = show(result);
      if (result.status === 'error' && c.critical) failing.push(name);
      if (result.status === 'error' || result.status === 'degraded') degraded = true;
    });
    const ready = failing.length === 0;
    for (const [name, fn] of derived) components[name] = show(fn({ ready, failing }));
    const shown: Record<string, unknown> = {};
    const wanted = [...facts].filter(([, f]) => full || f.public);
    // A fact may be read from the database (the last audit cleanup): it bounds its own wait.
    const values = await Promise.all(wanted.map(([, f]) => f.fn()));
    wanted.forEach(([name], i) => {
      shown[name] = values[i];
    });
    const status = !ready ? 'error' : degraded ? 'degraded' : 'ok';
    const body = full ? { status, version: build.version, revision: build.revision, ...components, ...shown } : { status, ...components, ...shown };
    return { ready, body };
  }

  return {
    register(name, check, options = {}) {
      checks.set(name, { check, critical: options.critical ?? false });
    },
    describe(name, fn, options = {}) {
      facts.set(name, { fn, public: options.public ?? false });
    },
    derive(name, fn) {
      derived.set(name, fn);
    },
    report: () => run(false),
    details: () => run(true),
  };
}
