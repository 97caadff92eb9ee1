// Readiness: named component checks (database, migrations, workers, notifications...) combined into one status.
export type ComponentStatus = 'ok' | 'disabled' | 'degraded' | 'error';
export interface ComponentCheck {
  status: ComponentStatus;
  message?: string;
}
export type Check = () => Promise<ComponentCheck> | ComponentCheck;

export interface HealthReport {
  ready: boolean;
  body: Record<string, unknown>;
}

export interface Health {
  /** Adds a component; `critical` ones make the service not ready when they fail. */
  register(name: string, check: Check, options?: { critical?: boolean }): void;
  /** Static facts shown in the report (pool sizes, rate-limit policies...). */
  describe(name: string, facts: () => unknown): void;
  report(): Promise<HealthReport>;
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

export function createHealth(version: string): Health {
  const checks = new Map<string, { check: Check; critical: boolean }>();
  const facts = new Map<string, () => unknown>();
  return {
    register(name, check, options = {}) {
      checks.set(name, { check, critical: options.critical ?? false });
    },
    describe(name, fn) {
      facts.set(name, fn);
    },
    async report() {
      const entries = [...checks.entries()];
      const results = await Promise.all(entries.map(([, c]) => runCheck(c.check)));
      const body: Record<string, unknown> = {};
      let ready = true;
      let degraded = false;
      entries.forEach(([name, c], i) => {
        const result = results[i] as ComponentCheck;
        body[name] = result;
        if (result.status === 'error' && c.critical) ready = false;
        if (result.status === 'error' || result.status === 'degraded') degraded = true;
      });
      for (const [name, fn] of facts) body[name] = fn();
      return { ready, body: { status: !ready ? 'error' : degraded ? 'degraded' : 'ok', version, ...body } };
    },
  };
}
